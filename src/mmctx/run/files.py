"""Names of the files in a run folder (shared by the runner and by scoring, which needs no runner)."""

MANIFEST = "manifest.json"
REQUESTS = "requests.jsonl"
STORE = "responses.sqlite"
RESULTS = "results.jsonl"
SUMMARY = "summary.json"
