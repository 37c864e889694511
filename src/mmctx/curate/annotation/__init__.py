"""Human validation of CoT demonstrations (FewMMBench appendix B.3).

A seeded sample of demonstrations that carry a rationale is exported as one form per annotator
(`export`); the filled forms are read back and checked (`forms`); demos the annotators rated
below a threshold lose their rationale, logged in the benchmark's curation log (`drop`). The
criteria and their scales are the paper's (`criteria`). Agreement statistics are
`mmctx.analysis.rater_agreement`'s; the forms themselves are written by
`mmctx.reporting.annotation_forms`.
"""
