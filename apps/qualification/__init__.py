"""Qualification: a model's capabilities probed and its memory measured on this plane's cards.

``commands`` is what ``nodeau model qualify|info`` asks; ``machine`` qualifies on this machine
(``machine_qualify``), ``fleet`` with a GPUService per task (``fleet_qualify``); the evidence
is kept under the model's artifact, where admission reads measured peaks.
"""
