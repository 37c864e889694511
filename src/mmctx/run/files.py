"""Names of the files in a run folder (shared by the runner and by scoring, which needs no runner)."""

MANIFEST = "manifest.json"
REQUESTS = "requests.jsonl"
STORE = "responses.sqlite"
RESULTS = "results.jsonl"
SUMMARY = "summary.json"
LOCK = "run.lock"  # held by the one process working in the folder (see `mmctx.run.runner.run_lock`)
JUDGE_STORE = "judges.sqlite"  # a context run's judge and extractor calls, keyed by their own model
