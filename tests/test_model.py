"""The tiny transformer of lesson 12, and the shipped trained models with their safe loader."""

import pickle
import zipfile

import pytest
import torch

import attention_lib
from attention_lib.encoder import TinyTransformer
from attention_lib.training.learning_to_attend import TrainedModel, load_trained, make_batch, save_trained
from attention_lib.training.shipped import TRAINED_DIR


@pytest.fixture
def model():
    torch.manual_seed(0)
    return TinyTransformer(vocab_size=12, num_answers=5, max_len=8, embed_dim=16, num_heads=4, num_layers=2, pad=0)


def test_shapes_and_maps(model):
    tokens = torch.randint(1, 12, (3, 6))
    out = model(tokens)
    assert out.logits.shape == (3, 6, 5)
    assert len(out.attention) == 2
    for weights in out.attention:
        assert weights.shape == (3, 4, 6, 6)
        torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 6))


def test_padding_gets_no_attention(model):
    tokens = torch.tensor([[3, 4, 5, 0, 0], [6, 7, 8, 9, 10]])
    out = model(tokens)
    for weights in out.attention:
        assert (weights[0, :, :, 3:] == 0).all()
    # the real words of a padded sentence do not depend on how much padding follows
    shorter = model(tokens[:1, :3])
    torch.testing.assert_close(out.logits[0, :3], shorter.logits[0])


def test_built_from_the_lessons_parts(model, monkeypatch):
    """The model calls the package's MultiHeadAttention (lesson 09) and LearnedPositions (lesson 11)."""
    calls = []
    for part in (attention_lib.MultiHeadAttention, attention_lib.LearnedPositions):
        original = part.forward

        def spy(self, *args, _original=original, _name=part.__name__, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(part, "forward", spy)
    model(torch.randint(1, 12, (2, 5)))
    assert calls == ["LearnedPositions", "MultiHeadAttention", "MultiHeadAttention"]
    assert type(model.positions) is attention_lib.LearnedPositions
    assert all(type(block.attention) is attention_lib.MultiHeadAttention for block in model.blocks)


def test_the_forward_pass_is_the_documented_parts(model):
    tokens = torch.randint(1, 12, (2, 5))
    x = model.token_embedding(tokens) + model.positions.weight[:5]
    for block in model.blocks:
        h = block.norm1(x)
        x = x + block.attention(h, h, h)[0]
        x = x + block.mlp(block.norm2(x))
    torch.testing.assert_close(model.readout(model.norm(x)), model(tokens).logits)


def test_without_positions_shuffling_the_input_shuffles_the_output():
    torch.manual_seed(1)
    bag = TinyTransformer(10, 10, 8, use_positions=False)
    with_positions = TinyTransformer(10, 10, 8)
    x = torch.randint(0, 10, (4, 8))
    order = torch.randperm(8)
    torch.testing.assert_close(bag(x[:, order]).logits, bag(x).logits[:, order])
    assert bag.positions is None
    assert not torch.allclose(with_positions(x[:, order]).logits, with_positions(x).logits[:, order], atol=1e-4)


def test_default_size_is_about_14k_parameters():
    assert sum(p.numel() for p in TinyTransformer(10, 10, 8).parameters()) == 13674


@pytest.mark.parametrize(("tokens", "error", "match"), [
    (torch.zeros(2, 9, dtype=torch.long), ValueError, r"at most max_len=8 tokens, but got L=9"),
    (torch.zeros(8, dtype=torch.long), ValueError, r"\(N, L\) integer ids, but got \(8,\).*unsqueeze\(0\)"),
    (torch.zeros(2, 8), TypeError, r"integer token ids, but tokens.dtype=torch.float32"),
    ([[1, 2, 3]], TypeError, r"tokens must be a torch.Tensor, but got list; wrap"),
    (torch.tensor([[1, 2, 10]]), ValueError, r"ids must lie in 0..9 \(this model knows vocab_size=10 tokens\), "
                                             r"but found \[10\]"),
    (torch.tensor([[-1, 2, 3]]), ValueError, r"but found \[-1\]; encode the input with the task"),
])
def test_forward_errors(tokens, error, match):
    with pytest.raises(error, match=match):
        TinyTransformer(10, 10, 8)(tokens)


def test_bad_sizes():
    with pytest.raises(ValueError, match="max_len must be positive, but max_len=0"):
        TinyTransformer(10, 10, 0)
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads"):
        TinyTransformer(10, 10, 8, embed_dim=30, num_heads=4)


# --- the shipped models and their loader ---------------------------------------------------------------------

@pytest.mark.parametrize(("task", "num_layers", "least"), [
    ("reversal", None, 0.99), ("agreement", None, 0.9), ("agreement", 1, 0.8), ("agreement_subject_first", None, 0.99)])
def test_shipped_weights_are_small_and_load(task, num_layers, least):
    path = TRAINED_DIR / (f"{task}.pt" if num_layers is None else f"{task}-{num_layers}block.pt")
    assert path.stat().st_size < 100_000
    trained = load_trained(task, num_layers=num_layers)
    assert isinstance(trained, TrainedModel)
    assert not trained.model.training
    assert trained.heldout_accuracy >= least  # agreement: on structures it never saw
    assert trained.task.name == task
    assert trained.model.config["num_layers"] == (num_layers or trained.task.recipe["num_layers"])


def test_the_recipes_own_number_of_blocks_is_the_recipes_file():
    a, b = load_trained("agreement"), load_trained("agreement", num_layers=2)
    assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values(),
                                                  strict=True))


def test_run_gives_answers_and_maps():
    tokens, answers, attention = load_trained("reversal").run("3 1 4 1 5 9 2 6")
    assert answers == ["6", "2", "9", "5", "1", "4", "1", "3"]
    assert len(attention) == 1
    assert attention[0].shape == (2, 8, 8)
    tokens, answers, _ = load_trained("agreement").run(["the", "dogs", "near", "a", "cat", "bark(s)", "softly"])
    assert answers == ["", "", "", "", "", "bark", ""]
    assert load_trained("agreement").run("near the dogs the cat purr(s)")[1][-1] == "purrs"
    assert load_trained("agreement").run("behind a cat the dogs bark(s)")[1][-1] == "bark"


def test_run_takes_token_ids_too():
    trained = load_trained("reversal")
    by_ids = trained.run([3, 1, 4, 1, 5, 9, 2, 6])
    assert by_ids[:2] == trained.run("3 1 4 1 5 9 2 6")[:2]
    assert trained.run(torch.tensor([3, 1, 4, 1, 5, 9, 2, 6]))[1] == by_ids[1]


@pytest.mark.parametrize(("task", "text", "match"), [
    ("reversal", "1 2 3 4 5 6 7 8 9", "at most 8 tokens"),
    ("reversal", "1 2 3 4 5 6 7 a", r"not in the reversal vocabulary; allowed: \['0'"),
    ("agreement", "the cat near the dogs purrs", r"\['purrs'\] are not in the agreement vocabulary; allowed"),
    ("agreement", " ".join(["the", "cat"] * 12), "at most 22 tokens, but got 24"),
    ("reversal", [1, 2, 3, 4, 5, 6, 7, 10], r"token ids \[10\] are not ids of the reversal vocabulary: use 0..9"),
    ("agreement", [0, 3, 12], r"token ids \[0\] are not ids of the agreement vocabulary: use 0..17 except 0 "
                              r"\(padding\)"),
])
def test_run_rejects_inputs_it_cannot_read(task, text, match):
    with pytest.raises(ValueError, match=match):
        load_trained(task).run(text)


@pytest.mark.parametrize(("text", "match"), [
    ([1, "2", 3, 4, 5, 6, 7, 8], r"not a mix; got items of types \['int', 'str'\]"),
    (3.5, "a string, a list of token strings or a list of token ids, but got float"),
    (torch.zeros(8), r"1-D tensor of integer ids, but got dtype=torch.float32"),
])
def test_run_rejects_inputs_of_the_wrong_type(text, match):
    with pytest.raises(TypeError, match=match):
        load_trained("reversal").run(text)


def test_unknown_task():
    with pytest.raises(ValueError, match=r"unknown task 'sort'; the tasks are \['agreement', "
                                         r"'agreement_attractors', 'agreement_subject_first', 'reversal'\]"):
        load_trained("sort")
    with pytest.raises(ValueError, match=r"no trained model of 'agreement_attractors' ships.*"
                                         r"train\('agreement_attractors'\)"):
        load_trained("agreement_attractors")
    with pytest.raises(ValueError, match=r"no trained model of 'reversal' with num_layers=2 ships.*"
                                         r"train\('reversal', num_layers=2\)"):
        load_trained("reversal", num_layers=2)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="is missing; reinstall attention_lib"):
        load_trained("reversal", path=tmp_path / "nothing.pt")


def test_corrupt_file(tmp_path):
    path = tmp_path / "reversal.pt"
    path.write_bytes((TRAINED_DIR / "reversal.pt").read_bytes()[:5000])  # cut short
    with pytest.raises(ValueError, match="not a readable weights file.*corrupt"):
        load_trained("reversal", path=path)
    path.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="not a readable weights file"):
        load_trained("reversal", path=path)


class _Exploit:
    """A pickle that would write a file when unpickled with pickle.load (never with weights_only=True)."""

    target = None

    def __reduce__(self):
        return (open, (str(self.target), "w"))


def test_never_unpickles_arbitrary_objects(tmp_path):
    marker = tmp_path / "pwned.txt"
    _Exploit.target = marker
    path = tmp_path / "reversal.pt"
    torch.save({"format": "attention_lib.trained/1", "payload": _Exploit()}, path)
    with zipfile.ZipFile(path) as archive:  # the file really holds the dangerous pickle
        assert any(name.endswith("data.pkl") for name in archive.namelist())
    with pytest.raises(ValueError, match="not a readable weights file"):
        load_trained("reversal", path=path)
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError):  # the plain torch.load default is what we refuse to do
        torch.load(path, weights_only=True)


def test_files_that_are_not_our_models(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(ValueError, match="not a trained model of attention_lib"):
        load_trained("reversal", path=path)
    save_trained(load_trained("agreement").model, "agreement", path, 1.0)
    with pytest.raises(ValueError, match="holds a model for task 'agreement', not 'reversal'"):
        load_trained("reversal", path=path)
    data = torch.load(path, weights_only=True)
    data["state_dict"].pop("readout.weight")
    torch.save(data, path)
    with pytest.raises(ValueError, match="does not fit the model it describes"):
        load_trained("agreement", path=path)


def test_save_and_load_round_trip(tmp_path):
    shipped = load_trained("reversal")
    save_trained(shipped.model, "reversal", tmp_path / "r.pt", 0.995)
    again = load_trained("reversal", path=tmp_path / "r.pt")
    assert again.heldout_accuracy == 0.995
    x = make_batch("reversal", 4, seed=0)[0]
    torch.testing.assert_close(again.model(x).logits, shipped.model(x).logits)
