"""``python -m attention_lib.training.speculative_decoding``: remake lesson 18's shipped drafts (see ``drafts``)."""

from .drafts import main

main()
