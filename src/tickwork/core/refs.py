"""The reserved keys that wire task results through a workflow.

- ``{"$result": "extract_users"}`` as a value in a task's config stands for the JSON result of
  that upstream task; the worker puts the result in its place before the task runs.
- ``{"$branch": ["load_full"]}`` as a task's result chooses which of its direct downstreams
  run; the others are skipped.
"""

from __future__ import annotations

RESULT_REF = "$result"
BRANCH_KEY = "$branch"
