"""``python -m attention_lib.training.latent_and_paged``: remake lesson 17's shipped models (see its ``shipped``
module)."""

from .shipped import main

main()
