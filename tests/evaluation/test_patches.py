import pytest

from evaluation.patches import PatchRejected, check_patch, extract_patch

PATCH = """--- a/m.py
+++ b/m.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 2
"""


def test_extract_from_a_fenced_block():
    assert extract_patch(f"Here you go:\n\n```diff\n{PATCH}```\nThanks") == PATCH


def test_extract_a_bare_diff_and_add_the_final_newline():
    assert extract_patch(PATCH.rstrip("\n")) == PATCH


def test_extract_skips_fences_that_are_not_diffs():
    assert extract_patch(f"```python\nprint(1)\n```\n```patch\n{PATCH}```") == PATCH


def test_prose_has_no_patch():
    assert extract_patch("I could not find the bug.") == ""


def test_lines_changed():
    stats = check_patch(PATCH)
    assert (stats.files, stats.added, stats.removed, stats.lines_changed) == (1, 1, 1, 2)


@pytest.mark.parametrize(
    "patch, reason",
    [
        ("", "empty"),
        (PATCH.replace("a/m.py", "a/../../etc/passwd").replace("b/m.py", "b/../../etc/passwd"), "escapes"),
        (PATCH.replace("a/m.py", "/etc/passwd").replace("b/m.py", "/etc/passwd"), "escapes"),
        (PATCH.replace("m.py", ".git/config"), "touches .git"),
        ("diff --git a/x.bin b/x.bin\nGIT binary patch\nliteral 3\nabc\n", "binary"),
        (PATCH.replace("m.py", "pkg/__pycache__/m.cpython-311.pyc"), "compiled Python"),
        (PATCH.replace("m.py", "conftest.cpython-311-x86_64-linux-gnu.so"), "compiled Python"),
        ("--- a/m.py\n+++ b/m.py\n@@ -1,5 +1,5 @@\n-x\n", "malformed"),
    ],
)
def test_bad_patches_are_rejected_with_the_reason(patch, reason):
    for _ in range(2):  # and again: a path that passed is remembered, a refused one never
        with pytest.raises(PatchRejected, match=reason):
            check_patch(patch)


def test_a_patch_is_scored_well_formed_or_not_with_its_size():
    from evaluation.scoring import score_pr_attempt

    good = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n--- a/y.py\n+++ b/y.py\n@@ -1 +1,2 @@\n a\n+c\n"
    score = score_pr_attempt(good, None)
    assert (score.patch_present, score.well_formed, score.lines_changed, score.files_changed) == (True, True, 3, 2)
    broken = "--- a/x.py\n+++ b/x.py\n@@ -1,5 +1,5 @@\n-a\n"
    score = score_pr_attempt(broken, None)
    assert (score.patch_present, score.well_formed, score.lines_changed) == (True, False, 0)
    assert not score_pr_attempt("", None).well_formed


OTHER = PATCH.replace("m.py", "other.py")


def test_extract_joins_one_block_per_file():
    answer = f"First file:\n```diff\n{PATCH}```\nSecond file:\n```diff\n{OTHER}```\n"
    assert extract_patch(answer) == PATCH + OTHER
    assert check_patch(extract_patch(answer)).files == 2


def test_a_restated_patch_is_taken_once():
    answer = f"```diff\n{PATCH}```\nTo recap, the whole change:\n```diff\n{PATCH}{OTHER}```\n"
    assert extract_patch(answer) == PATCH


# `git diff --binary --full-index` of a new 10-byte PNG header, as a model's patch may carry it.
BINARY = (
    "diff --git a/data/logo.png b/data/logo.png\nnew file mode 100644\n"
    "index 0000000000000000000000000000000000000000..45a21f14508d7b08cb5cbeb662de2364b6f90584\n"
    "GIT binary patch\nliteral 10\nRcmeAS@N?(olHy`u000e}0jdB1\n\nliteral 0\nHcmV?d00001\n\n"
)
NO_CONTENT = (
    "diff --git a/data/logo.png b/data/logo.png\nindex 1111111..2222222 100644\n"
    "Binary files a/data/logo.png and b/data/logo.png differ\n"
)


def test_a_binary_hunk_is_vetted_like_any_other_where_the_caller_takes_them():
    """Validation takes binary hunks as the harness does; a task supply still refuses them."""
    stats = check_patch(PATCH + BINARY, binary=True)
    assert (stats.files, stats.paths) == (2, ("m.py", "data/logo.png"))
    assert check_patch(NO_CONTENT, binary=True).paths == ("data/logo.png",)
    with pytest.raises(PatchRejected, match="binary"):
        check_patch(PATCH + BINARY)
    with pytest.raises(PatchRejected, match="escapes"):
        check_patch(BINARY.replace("data/logo.png", "../logo.png"), binary=True)
    with pytest.raises(PatchRejected, match="compiled Python"):
        check_patch(BINARY.replace("data/logo.png", "tests/__pycache__/test_m.cpython-311.pyc"), binary=True)
    with pytest.raises(PatchRejected, match="symbolic links"):
        check_patch(BINARY.replace("new file mode 100644", "new file mode 120000"), binary=True)


def test_a_binary_patch_is_scored_well_formed_as_validation_takes_it():
    from evaluation.scoring import score_pr_attempt

    assert score_pr_attempt(PATCH + BINARY, None).well_formed


def _real_patches() -> list[str]:
    """Every patch and test patch of the SWE-bench Lite sample, and of the demo's tasks."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    rows = [json.loads(line) for line in (root / "tests/data/swebench/SWE-bench_Lite_dev.jsonl").open()]
    patches = [row[name] for row in rows for name in ("patch", "test_patch")]
    patches += [path.read_text() for path in sorted((root / "datasets/demo_tasks").glob("*/*.patch"))]
    return patches


def _damaged(patch: str) -> list[str]:
    """The patch cut short at several lines, and with a line no hunk may hold, as a model's
    truncated or garbled answer would be."""
    lines = patch.splitlines(keepends=True)
    cuts = ["".join(lines[:cut]) for cut in range(3, len(lines), max(1, len(lines) // 7))]
    places = range(4, len(lines), max(1, len(lines) // 5))
    garbled = ["".join([*lines[:at], "?garbled\n", *lines[at:]]) for at in places]
    return cuts + garbled


def _full_parse_stats(patch: str):
    """What check_patch read with unidiff's full parse (a Line object per line), before it
    took the metadata pass."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        files = PatchSet(patch)
    except UnidiffParseError:
        return "malformed"
    names = [(f.source_file, f.target_file, f.is_binary_file) for f in files]
    return len(files), files.added, files.removed, names


def _metadata_stats(patch: str):
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        files = PatchSet(patch, metadata_only=True)
    except UnidiffParseError:
        return "malformed"
    names = [(f.source_file, f.target_file, f.is_binary_file) for f in files]
    return len(files), files.added, files.removed, names


def test_the_metadata_pass_reads_every_patch_as_the_full_parse_does():
    """check_patch parses with unidiff's metadata pass (issue 31): on real patches, whole,
    cut short or garbled, it must accept, refuse and count exactly as the full parse."""
    patches = _real_patches()
    assert len(patches) >= 50
    cases = [variant for patch in patches for variant in (patch, *_damaged(patch))]
    verdicts = [_full_parse_stats(case) for case in cases]
    assert "malformed" in verdicts and any(verdict != "malformed" for verdict in verdicts)
    assert [_metadata_stats(case) for case in cases] == verdicts
    for case, verdict in zip(cases, verdicts, strict=True):
        if verdict == "malformed":
            continue
        try:
            stats = check_patch(case, binary=True)
        except PatchRejected:
            continue  # refused for its paths or content, which the parse does not decide
        assert (stats.files, stats.added, stats.removed) == verdict[:3]
