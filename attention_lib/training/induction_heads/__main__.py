"""``python -m attention_lib.training.induction_heads``: remake lesson 13's shipped models (see its ``shipped``)."""

from .shipped import main

main()
