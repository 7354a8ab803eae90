"""Diagnosis of the Nsight inputs: facts of nsys exports and ncu kernels turned into findings and advice.

The nsys and ncu homes (``my_utils.profiling.nsys``, ``my_utils.profiling.ncu``) read and tabulate;
this package holds what judges them: ``facts`` and ``setup`` (facts from the homes' tables),
``rules``, ``comm_rules``, ``ncu_rules`` and ``rule_base`` (the Nsight rules), ``advice`` and
``analyze`` (the pass the run model calls).
"""
