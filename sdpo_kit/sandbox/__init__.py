"""Running model-written Python: one untrusted program at a time in a locked-down child process, graded
against test cases in the parent. The third floor: it needs nothing of sdpo_kit (the lab's code task and
the ``code`` reward stand on it).

    process.py   the parent side: ``run_program`` starts a fresh ``python -I -S child.py`` in a temp dir
                 (minimal environment, own session, output caps, wall-clock limit); ``isolation_report``
    child.py     the child's script, copied into the temp dir and run by path: rlimits, a network
                 namespace, nobody, Landlock, then the program (it imports nothing from sdpo_kit)
    runner.py    test cases (LiveCodeBench's stdin and call forms, APPS's) graded in the parent:
                 ``run_tests``, ``run_tests_many`` (a worker pool), ``score_completions``, ``split_tests``
    batch.py     call tests of many programs, one child per distinct program (the lab's code task)
    feedback.py  the SDPO authors' test-case feedback text (runtime error, time limit, wrong answer)

Left out on purpose: the ``code`` reward itself (``rewards/code.py``) and the problem set
(``rewards/code_problems.py``); containers, seccomp and cgroups (see ``process.py``).
"""
