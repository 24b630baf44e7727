"""Qualification: a model's capabilities probed and its memory measured on this plane's cards.

``commands`` is what ``nodeau model qualify|info`` asks and shows; ``machine`` qualifies on
this machine, ``fleet`` with a GPUService per task; the evidence is kept under the model's
artifact, where admission reads measured peaks.
"""
