"""The measured bands of :mod:`attention_lib.training.bands`.

Written by `python -m attention_lib.training.bands`; do not edit by hand. Measured with torch
2.13.0+cpu, one thread, lesson 12: seeds 0-4; lesson 13: seeds 0-4; lesson 15: seeds 0-4,
on the CPU paths: native (AVX512), ATEN_CPU_CAPABILITY=avx2, ATEN_CPU_CAPABILITY=default.
"""

#: ``name: (low, high, kind, digits, seeds)``, see :class:`attention_lib.training.bands.Band`.
BANDS = {
    'agreement: held-out accuracy':
        (0.8629999756813049, 0.9415000081062317, 'share', 2, 'all'),
    "agreement: largest difference from the shipped model's maps":
        (0.0, 0.021658658981323242, 'number', 2, '0'),
    "agreement_subject_first: largest difference from the shipped model's maps":
        (0.0, 5.066394805908203e-06, 'number', 2, '0'),
    'generation: agreeing completions after 150 steps':
        (0.615, 0.815, 'share', 2, 'all'),
    'generation: agreeing completions after 300 steps':
        (0.99, 1.0, 'share', 2, 'all'),
    'generation: loss at the first of 150 steps':
        (3.2385716438293457, 3.389946460723877, 'number', 2, 'all'),
    'generation: mean loss of the last 20 of 150 steps':
        (1.4265070855617523, 1.443899005651474, 'number', 2, 'all'),
    "generation: verb's right form scored higher after 150 steps":
        (0.7799999713897705, 0.9325000047683716, 'share', 2, 'all'),
    'generation: well-formed completions after 150 steps':
        (0.95, 1.0, 'share', 2, 'all'),
    'induction: accuracy on the repeated part':
        (0.9373034238815308, 0.943343460559845, 'share', 2, 'all'),
    'induction: accuracy on the rest':
        (0.03950723260641098, 0.054352227598428726, 'share', 2, 'all'),
    'induction: loss on the repeated part':
        (0.5422035455703735, 0.5989060997962952, 'number', 2, 'all'),
    'induction: loss on the repeated part, first 20 steps':
        (3.576315629482269, 3.6069969534873962, 'number', 1, 'all'),
    'induction: loss on the repeated part, last 20 steps':
        (0.5605094045400619, 0.6178292900323867, 'number', 1, 'all'),
    'induction: loss on the rest':
        (3.661525249481201, 3.6683058738708496, 'number', 2, 'all'),
    'induction: loss on the rest, lowest 20-step moving average':
        (3.4959451079368593, 3.5012388706207274, 'number', 2, 'all'),
    'induction: rise of the loss on the rest, from its lowest moving average to its last 20 steps':
        (0.16731630563735944, 0.1840213894844056, 'number', 2, 'all'),
    'induction: step where the induction score is halfway up':
        (150, 175, 'step', 2, 'all'),
    'induction: step where the loss is halfway down':
        (151, 181, 'step', 2, 'all'),
    'induction: step where the middle half of the fall begins':
        (126, 151, 'step', 2, 'all'),
    'induction: step where the previous-token score is halfway up':
        (175, 200, 'step', 2, 'all'),
    'induction: steps from the loss halfway down to the induction score halfway up':
        (-6, 12, 'step', 2, 'all'),
    'induction: steps from the loss halfway down to the previous-token score halfway up':
        (9, 27, 'step', 2, 'all'),
    'induction: steps the middle half of the fall takes':
        (43, 54, 'step', 2, 'all'),
    'reversal without positions: digit accuracy':
        (0.3189375102519989, 0.3226250112056732, 'share', 2, 'all'),
    'reversal without positions: held-out sequence accuracy':
        (0.0, 0.0, 'share', 2, 'all'),
    'reversal: held-out sequence accuracy':
        (1.0, 1.0, 'share', 2, 'all'),
    "reversal: largest difference from the shipped model's maps":
        (0.0, 3.0547380447387695e-06, 'number', 2, '0'),
    'reversal: mean weight on the mirror position after 0 steps':
        (0.11913634836673737, 0.140036940574646, 'number', 2, 'all'),
    'reversal: mean weight on the mirror position after 20 steps':
        (0.2818186283111572, 0.34005069732666016, 'number', 2, 'all'),
    'reversal: mean weight on the mirror position after 250 steps':
        (0.9477788805961609, 0.9708890318870544, 'number', 2, 'all'),
    'reversal: mean weight on the mirror position after 30 steps':
        (0.4488237202167511, 0.58721524477005, 'number', 2, 'all'),
    'reversal: mean weight on the mirror position after 40 steps':
        (0.6604149341583252, 0.8440033197402954, 'number', 2, 'all'),
    'reversal: mean weight on the mirror position after 60 steps':
        (0.9058303833007812, 0.9597526788711548, 'number', 2, 'all'),
    'reversal: share of rows on the mirror position, lower head':
        (1.0, 1.0, 'share', 2, 'all'),
    'shortcut: accuracy on the repeated part, k = 16':
        (0.9998999834060669, 1.0, 'share', 2, 'all'),
    'shortcut: accuracy on the repeated part, k from 6 to 15':
        (0.04702591523528099, 0.05430939048528671, 'share', 2, 'all'),
    'shortcut: share of copy queries whose strongest key is 15 back, in the layer-1 head that does it most':
        (0.9993952512741089, 1.0, 'share', 2, 'all'),
    'subject-first: held-out accuracy':
        (0.9980000257492065, 1.0, 'share', 2, 'all'),
}
