"""`import_tasks --format humaneval`: the published file, and bad files refused whole."""

import gzip
import json

import pytest
from django.core.management import CommandError

from datasets.models import Dataset, DatasetKind, TaskInstance
from tests.cli import run_command
from tests.samples import HUMANEVAL, PROBLEMS


def import_file(org, path, *options, dataset="humaneval"):
    return run_command("import_tasks", "--org", org.slug, "--dataset", dataset, "--format", "humaneval", *options, path)


def write_lines(tmp_path, rows, name="problems.jsonl"):
    path = tmp_path / name
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


def edited(index, **changes):
    row = dict(PROBLEMS[index])
    for key, value in changes.items():
        if value is None:
            row.pop(key)
        else:
            row[key] = value
    return row


def test_the_published_humaneval_file_imports(org):
    out = import_file(org, str(HUMANEVAL))
    assert "Created dataset 'humaneval' (Code execution): 164 task(s)" in out
    dataset = Dataset.objects.get(org=org, name="humaneval")
    assert dataset.kind == DatasetKind.CODE_EXEC
    task = dataset.tasks.get(external_id="HumanEval/0")
    first = PROBLEMS[0]
    assert task.problem_statement == first["prompt"] and task.title == "has_close_elements"
    assert task.payload == {f: first[f] for f in ("prompt", "entry_point", "test", "canonical_solution")}
    assert task.metadata == {} and task.position == 0
    assert list(dataset.tasks.values_list("position", flat=True)) == list(range(164))


def test_the_same_lines_uncompressed_import_too(org, tmp_path):
    out = import_file(org, write_lines(tmp_path, [edited(0, source="mine"), PROBLEMS[1]]))
    assert "2 task(s)" in out
    assert TaskInstance.objects.get(external_id="HumanEval/0").metadata == {"source": "mine"}


def test_a_bad_line_refuses_the_whole_file_naming_file_line_and_field(org, tmp_path):
    rows = [PROBLEMS[0], edited(1, entry_point=None), edited(2, test="assert True"), "{not json", [1], PROBLEMS[5]]
    with pytest.raises(CommandError) as caught:
        import_file(org, write_lines(tmp_path, rows))
    message = str(caught.value)
    assert "problems.jsonl:2: field entry_point: missing" in message
    assert "problems.jsonl:3: field test: does not define check(candidate)" in message
    assert "problems.jsonl:4: not valid JSON" in message
    assert "problems.jsonl:5: each line must be a JSON object" in message
    assert "problems.jsonl:1" not in message and "problems.jsonl:6" not in message
    assert not Dataset.objects.exists() and not TaskInstance.objects.exists()


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (edited(0, prompt=""), "problems.jsonl:1: field prompt: missing or empty"),
        (edited(0, canonical_solution=["    return 1"]), "problems.jsonl:1: field canonical_solution: must be text"),
        (edited(0, canonical_solution="    return (\n"), "field canonical_solution: with the prompt and the test"),
        (edited(0, entry_point="class"), "problems.jsonl:1: field entry_point: 'class' is not a Python function name"),
        (edited(0, task_id="a\nb"), "problems.jsonl:1: field task_id: contains a control character"),
        (edited(0, task_id=None), "problems.jsonl:1: field task_id: missing"),
        ('{"task_id": "x", "task_id": "y"}', "problems.jsonl:1: not valid JSON: the key 'task_id' appears twice"),
    ],
)
def test_each_kind_of_bad_line_is_named(org, tmp_path, row, problem):
    with pytest.raises(CommandError) as caught:
        import_file(org, write_lines(tmp_path, [row]))
    assert problem in str(caught.value)
    assert not Dataset.objects.exists()


def test_a_line_that_is_not_utf8_is_named(org, tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_bytes(json.dumps(PROBLEMS[0]).encode() + b"\n" + b'{"task_id": "\xff"}\n')
    with pytest.raises(CommandError, match=r"problems.jsonl:2: not valid UTF-8 \(byte 0xff"):
        import_file(org, str(path))


def test_duplicates_in_the_file_or_the_dataset_are_refused(org, tmp_path):
    with pytest.raises(
        CommandError, match=r"problems\.jsonl:3: field task_id: 'HumanEval/0' already appears on line 1"
    ):
        import_file(org, write_lines(tmp_path, [PROBLEMS[0], PROBLEMS[1], PROBLEMS[0]]))
    import_file(org, write_lines(tmp_path, [PROBLEMS[0]]))
    with pytest.raises(CommandError, match="'HumanEval/0' is already in dataset 'humaneval'"):
        import_file(org, write_lines(tmp_path, [PROBLEMS[1], PROBLEMS[0]]))
    assert TaskInstance.objects.count() == 1


def test_a_broken_or_oversized_gzip_file_is_refused(org, tmp_path, monkeypatch):
    broken = tmp_path / "HumanEval.jsonl.gz"
    broken.write_bytes(HUMANEVAL.read_bytes()[:2000])
    with pytest.raises(CommandError, match=r"HumanEval\.jsonl\.gz: not a readable gzip file"):
        import_file(org, str(broken))
    monkeypatch.setattr("datasets.formats.humaneval.UNCOMPRESSED_MAX_BYTES", 100_000)
    with pytest.raises(CommandError, match="larger than 100,000 bytes once uncompressed"):
        import_file(org, str(HUMANEVAL))
    assert not Dataset.objects.exists()


def test_fields_named_otherwise_are_mapped(org, tmp_path):
    row = edited(53, solution=PROBLEMS[53]["canonical_solution"], canonical_solution=None)
    import_file(org, write_lines(tmp_path, [row]), "--map", "canonical_solution=solution")
    task = TaskInstance.objects.get()
    assert task.payload["canonical_solution"] == PROBLEMS[53]["canonical_solution"] and task.metadata == {}
    with pytest.raises(CommandError, match=r"problems\.jsonl:1: field solution: missing"):
        import_file(org, write_lines(tmp_path, [PROBLEMS[1]]), "--map", "canonical_solution=solution", dataset="d2")
    with pytest.raises(CommandError, match="--map: answer: not a HumanEval field"):
        import_file(org, write_lines(tmp_path, [PROBLEMS[1]]), "--map", "answer=solution", dataset="d2")


def test_humaneval_problems_go_into_a_code_dataset_only(org, tmp_path):
    with pytest.raises(CommandError, match="HumanEval problems are code_exec tasks, not qa_exact"):
        import_file(org, write_lines(tmp_path, [PROBLEMS[0]]), "--kind", "qa_exact")
    Dataset.objects.create(org=org, name="questions", kind=DatasetKind.QA_EXACT)
    with pytest.raises(CommandError, match="holds Question and answer"):
        import_file(org, write_lines(tmp_path, [PROBLEMS[0]]), dataset="questions")
    assert not TaskInstance.objects.exists()


def test_an_empty_file_is_refused(org, tmp_path):
    path = tmp_path / "HumanEval.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n\n"))
    with pytest.raises(CommandError, match="no tasks in the file"):
        import_file(org, str(path))
