"""The picture of the Triton kernel's programs and the tiles each one visits."""

import matplotlib
import pytest

from attention_lib.plotting import alt_text, masked_tiles, plot_programs, program_tiles

matplotlib.use("Agg")


@pytest.mark.parametrize(("L", "S", "block_l", "block_s"), [(100, 77, 32, 32), (40, 40, 16, 16), (17, 64, 16, 32),
                                                            (64, 17, 32, 16)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_each_program_visits_the_key_blocks_its_queries_may_see(L, S, block_l, block_s, is_causal):
    programs = program_tiles(L, S, block_l, block_s, is_causal)
    assert len(programs) == -(-L // block_l)
    for p, starts in enumerate(programs):
        last_query = (p + 1) * block_l - 1  # the block's last row, padded rows included
        expected = [s for s in range(0, S, block_s) if not is_causal or s <= last_query]
        assert starts == expected


def test_the_picture_labels_programs_steps_and_skipped_tiles():
    import matplotlib.pyplot as plt

    fig = plot_programs(100, 100, 32, 32, is_causal=True)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("skipped") == 6
    assert texts.count("step 1") == 3  # and program 0's one tile, its diagonal: "step 1\nmasked"
    assert texts.count("step 1\nmasked") + texts.count("step 2\nmasked") + texts.count("step 3\nmasked") == 3
    assert "step 4\nmasked" in texts
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "program 0: queries 0-31"
    assert labels[3] == "program 3: queries 96-99"
    assert labels[-2] == "masked: the diagonal, or past the last key"
    assert labels[-1] == "skipped: every key in the future"
    assert "10 of 16 tiles are computed, 4 of them with a mask" in alt_text(fig)
    assert ax.get_xlabel() == "keys (position)"
    plt.close(fig)


def test_without_causal_nothing_is_skipped():
    import matplotlib.pyplot as plt

    fig = plot_programs(100, 77, 32, 32)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "skipped" not in texts
    assert texts.count("step 3\nmasked") == 4  # keys 64-95 run past S = 77: each program masks its last tile
    assert texts.count("step 1") == texts.count("step 2") == 4
    plt.close(fig)


@pytest.mark.parametrize(("L", "S", "block_l", "block_s"), [(100, 77, 32, 32), (40, 40, 16, 16), (17, 64, 16, 32),
                                                            (64, 17, 32, 16), (64, 80, 32, 16)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_exactly_the_edge_tiles_are_masked(L, S, block_l, block_s, is_causal):
    """A tile needs a mask when it runs past S or, causal, holds a key after some query of its block: the others a
    program visits are full, every key there and before every query of the block."""
    for p, (starts, masked) in enumerate(zip(program_tiles(L, S, block_l, block_s, is_causal),
                                             masked_tiles(L, S, block_l, block_s, is_causal), strict=True)):
        first_query = p * block_l
        for start in starts:
            last_key = start + block_s - 1
            needs_mask = last_key >= S or (is_causal and last_key > first_query)
            assert (start in masked) == needs_mask, (p, start)
        assert set(masked) <= set(starts)
