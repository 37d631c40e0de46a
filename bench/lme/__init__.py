"""LongMemEval (ICLR 2025) through Lethe's public API: `python -m bench.longmemeval`.

data.py reads the official JSON into what the agent sees (`Case`) and what only grading
reads (`Gold`); play.py plays a case through a policy or a raw-turn retriever and says
which turns each recalled item came from; metrics.py grades; report.py prints the table,
the RESULTS.md section and the HTML page; qa.py asks a reader and a judge model when one
is configured.
"""
