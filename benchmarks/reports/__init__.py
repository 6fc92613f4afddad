"""What ``benchmarks/report.py`` renders, one module a family of results files: each turns a results file
into the Markdown of a block (a table and its provenance line) or the numbers of the prose (fields).

    format      tables, numbers, intervals and the provenance line every block ends with
    demo        the tiny lab's demo, its variants, step times, warm start, plateau
    algorithms  VAPOR, SDPO, teacher-student PPO and the export round trips on the tiny lab
    sdpo_lab    the SDPO lab's runs (sdpo_lab*.json); sdpo_room: its headroom and room-to-learn files
    code        the code lab and the code reward
    real        SmolLM2-135M-Instruct, the real CPU model: tasks, speed, decoding, learning, SDPO
    notebooks   the notebooks' reference figures and wall times, and CI on a fresh clone
    course      notebook 00's first run and the lab's held-out accuracy
    docs        the concept pages' and notebooks' prose numbers
    pins        the pinned versions and install line (from the repository's files)
    gpu         what has run on a GPU (benchmarks/results/gpu/)
"""
