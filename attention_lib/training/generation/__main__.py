"""``python -m attention_lib.training.generation``: remake lesson 15's shipped models (see its ``shipped`` module)."""

from .shipped import main

main()
