"""The page templates (templates/*.j2) compiled to Python by Jinja, shipped in the wheel: a
fresh CI runner renders `plan` and the PR comment without compiling them (~40 ms) and without a
bytecode cache in a directory someone else may write. Generated; `BUILT` names the Jinja version
and the templates' digest they were built from, and dpguard.planner.render uses them only when
both match (tests/test_plan_templates.py rebuilds them: DPGUARD_UPDATE_GOLDEN=1)."""
