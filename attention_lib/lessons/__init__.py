"""What the lessons share: the toy sentence and its data (:mod:`~attention_lib.lessons.data`), and the small
experiments they run and their explorers redraw (:mod:`~attention_lib.lessons.experiments`)."""
