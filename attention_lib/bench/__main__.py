"""``python -m attention_lib.bench``: run the benchmark (see :mod:`attention_lib.bench.run`)."""

from .run import main

main()
