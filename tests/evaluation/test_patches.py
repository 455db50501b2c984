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
        ("--- a/m.py\n+++ b/m.py\n@@ -1,5 +1,5 @@\n-x\n", "malformed"),
    ],
)
def test_bad_patches_are_rejected_with_the_reason(patch, reason):
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
