"""``python -m attention_lib.training.learning_to_attend``: remake lesson 12's shipped models (see its ``shipped``)."""

from .shipped import main

main()
