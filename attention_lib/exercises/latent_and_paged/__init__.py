"""The exercises of ``notebooks/17_latent_and_paged.ipynb``: MLA's absorbed scores
(:mod:`~attention_lib.exercises.latent_and_paged.absorbed`), reading keys through a block table
(:mod:`~attention_lib.exercises.latent_and_paged.block_table`), and the bug gallery predicted
(:mod:`~attention_lib.exercises.latent_and_paged.gallery`)."""

from .absorbed import check_absorbed_scores
from .block_table import MISTAKES, check_read_through_table
from .gallery import WHY, check_gallery_predictions

__all__ = ["MISTAKES", "WHY", "check_absorbed_scores", "check_gallery_predictions", "check_read_through_table"]
