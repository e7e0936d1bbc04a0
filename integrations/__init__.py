"""Thin adapters: ``transfersearch.integrations.optuna``, ``.ray`` and ``.torch``.

Each imports its framework when imported; the core never imports them.
"""
