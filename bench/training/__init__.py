"""Training parity of SageBwd vs full-precision attention (issue 14).

``run.py`` is the command; ``data.py`` builds the dataset, ``arms.py`` lists
the runs, ``train.py`` trains one, ``table2.py`` is the paper's per-tensor
error analysis on a checkpoint and ``report.py`` writes the plots and tables.
Import it with ``bench/`` on ``sys.path`` (``from training import ...``).
"""
