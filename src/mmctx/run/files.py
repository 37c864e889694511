"""Names of the files in a run folder (shared by the runner and by scoring, which needs no runner)."""

MANIFEST = "manifest.json"
REQUESTS = "requests.jsonl"
STORE = "responses.sqlite"
RESULTS = "results.jsonl"
SUMMARY = "summary.json"
LOCK = "run.lock"  # held by the one process working in the folder (see `mmctx.run.runner.run_lock`)
JUDGE_STORE = "judges.sqlite"  # a context run's judge and extractor calls, keyed by their own model
COT_JUDGE_STORE = "cot_judges.sqlite"  # a few-shot run's CoT reasoning judge calls (`mmctx.scoring.cot_judging`)
COT_JUDGEMENTS = "cot_judgements.jsonl"  # the judged sample of CoT responses, one row each
