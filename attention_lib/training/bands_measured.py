"""The measured bands of :mod:`attention_lib.training.bands`.

Written by `python -m attention_lib.training.bands`; do not edit by hand. Measured with torch
2.13.0+cpu, one thread, seeds 0-4, on the CPU paths: native (AVX2),
ATEN_CPU_CAPABILITY=avx2, ATEN_CPU_CAPABILITY=default.
"""

#: ``name: (low, high, kind, digits, seeds)``, see :class:`attention_lib.training.bands.Band`.
BANDS = {
    'induction: accuracy on the repeated part':
        (0.9373034238815308, 0.943343460559845, 'share', 2, 'all'),
    'induction: accuracy on the rest':
        (0.03950723260641098, 0.054352227598428726, 'share', 2, 'all'),
    "induction: largest difference from the shipped model's maps":
        (0.0, 2.0503997802734375e-05, 'number', 2, '0'),
    'induction: loss on the repeated part':
        (0.5422035455703735, 0.5989060997962952, 'number', 2, 'all'),
    'induction: loss on the repeated part, first 20 steps':
        (3.576315629482269, 3.6069969296455384, 'number', 1, 'all'),
    'induction: loss on the repeated part, last 20 steps':
        (0.5605094045400619, 0.6178292900323867, 'number', 1, 'all'),
    'induction: loss on the rest':
        (3.6615257263183594, 3.6683056354522705, 'number', 2, 'all'),
    'induction: step where the induction score is halfway up':
        (150, 175, 'step', 2, 'all'),
    'induction: step where the loss is halfway down':
        (151, 181, 'step', 2, 'all'),
    'induction: step where the middle half of the fall begins':
        (126, 151, 'step', 2, 'all'),
    'induction: step where the previous-token score is halfway up':
        (175, 200, 'step', 2, 'all'),
    'induction: steps the middle half of the fall takes':
        (43, 54, 'step', 2, 'all'),
    'shortcut: accuracy on the repeated part, k = 16':
        (0.9998999834060669, 1.0, 'share', 2, 'all'),
    'shortcut: accuracy on the repeated part, k from 6 to 15':
        (0.04702591523528099, 0.05430939048528671, 'share', 2, 'all'),
    'shortcut: share of copy queries whose strongest key is 15 back, in the lower layer-1 head':
        (0.9697611331939697, 0.9993952512741089, 'share', 2, 'all'),
}
