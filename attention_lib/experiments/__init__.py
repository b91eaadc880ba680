"""The lessons' small experiments, one module per lesson (:mod:`~attention_lib.experiments.generation`: lesson 15)."""
