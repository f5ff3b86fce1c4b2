"""What operators see: the review list of flagged turns, per-module numbers and the CSV
export, backend health, and deleting one learner's data.

May import teach (progress), risk, access, render and storage; never turns or web.
"""
