"""The ``transfersearch demo`` application: a user of the library, not part of its core.

``transfersearch_demo.app`` runs the demo (Optuna, PyTorch, matplotlib, tqdm:
``pip install 'transfersearch[demo]'``), ``transfersearch_demo.task`` is its training task, and
``transfersearch_demo.command`` adds the ``demo`` subcommand to the CLI (through the
``transfersearch.commands`` entry point). Importing this package imports none of the frameworks.
"""
