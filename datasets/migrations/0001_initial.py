import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """The task supply's models, moved here from experiments: their tables stay where they are
    (``db_table``), so this only tells Django's state where the models now live."""

    initial = True

    dependencies = [
        ('experiments', '0042_runarm_misconfigured'),
        ('orgs', '0004_webhooks'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Dataset',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('code', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('name', models.CharField(max_length=200)),
                        ('kind', models.CharField(choices=[('pr_patch', 'PR patch'), ('qa_exact', 'Question and answer (Jeopardy style)'), ('multiple_choice', 'Multiple choice'), ('code_exec', 'Code execution'), ('free_text', 'Free text, judged')], default='pr_patch', max_length=32)),
                        ('description', models.TextField(blank=True)),
                        ('repo_sources', models.JSONField(blank=True, default=dict, help_text='Where each task repository is cloned from: {"owner/name": "/srv/repos/name" or a clone URL}')),
                        ('test_command', models.JSONField(blank=True, default=list, help_text="Test command (argument list) for repository tasks that name none; {python} is the worker's interpreter, {junit} where the JUnit report goes")),
                        ('build_command', models.JSONField(blank=True, default=list, help_text='Build command (argument list); empty: byte-compile the changed Python files')),
                        ('harness_rule', models.CharField(choices=[('strict', 'Strict: no test file, test directory or test configuration'), ('task', "The task's own tests: its test files and their directories, and runner hooks")], default='strict', help_text="What counts as a patch changing the tests: any test or test configuration file (mined tasks), or the task's own test files and directories (imported SWE-bench tasks, as the harness has it)", max_length=16)),
                        ('version', models.PositiveIntegerField(default=1, help_text='The latest version: each import into a dataset that holds tasks makes a new one')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('org', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='datasets', to='orgs.organization')),
                    ],
                    options={
                        'db_table': 'experiments_dataset',
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='MiningSource',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(help_text='owner/name the mined tasks point at', max_length=200)),
                        ('path', models.CharField(help_text='Absolute path of a git clone on the server', max_length=500)),
                        ('branch', models.CharField(default='HEAD', help_text='Branch or commit whose history is mined', max_length=200)),
                        ('test_command', models.JSONField(blank=True, default=list, help_text="Argument list ({python}, {junit}); empty: ingest_prs's default pytest")),
                        ('enabled', models.BooleanField(default=True)),
                        ('org', models.ForeignKey(blank=True, help_text='Only this organisation may mine it; empty: every organisation', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='mining_sources', to='orgs.organization')),
                    ],
                    options={
                        'db_table': 'experiments_miningsource',
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='MiningJob',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('code', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('dataset_name', models.CharField(max_length=200)),
                        ('max_tasks', models.PositiveIntegerField()),
                        ('max_candidates', models.PositiveIntegerField()),
                        ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('done', 'Done'), ('failed', 'Failed')], default='queued', max_length=16)),
                        ('kept', models.PositiveIntegerField(default=0)),
                        ('rejected', models.PositiveIntegerField(default=0)),
                        ('skipped', models.PositiveIntegerField(default=0, help_text='Commits that are no candidate, or decided before')),
                        ('judging', models.CharField(blank=True, help_text='The candidate being judged', max_length=300)),
                        ('message', models.TextField(blank=True, help_text='How it ended, or why it stopped')),
                        ('job_id', models.CharField(blank=True, max_length=100)),
                        ('claim_token', models.UUIDField(blank=True, editable=False, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                        ('dataset', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='mining_jobs', to='datasets.dataset')),
                        ('org', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='mining_jobs', to='orgs.organization')),
                        ('source', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='datasets.miningsource')),
                    ],
                    options={
                        'db_table': 'experiments_miningjob',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='TaskInstance',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('code', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('external_id', models.CharField(help_text="The task's id in its source, e.g. a SWE-bench instance_id", max_length=200)),
                        ('position', models.PositiveIntegerField(default=0, help_text='Order in the dataset')),
                        ('title', models.CharField(blank=True, max_length=300)),
                        ('problem_statement', models.TextField()),
                        ('repo_files', models.JSONField(default=dict, help_text='path -> content at the base commit')),
                        ('gold_patch', models.TextField(blank=True)),
                        ('test_command', models.JSONField(default=list)),
                        ('repo', models.CharField(blank=True, help_text='owner/name, empty for self-contained tasks', max_length=200)),
                        ('base_commit', models.CharField(blank=True, max_length=64)),
                        ('test_patch', models.TextField(blank=True, help_text='Tests added or changed by the fix, applied before testing')),
                        ('hints_text', models.TextField(blank=True)),
                        ('version', models.CharField(blank=True, max_length=50)),
                        ('fail_to_pass', models.JSONField(blank=True, default=list, help_text='Tests the fix must turn green')),
                        ('pass_to_pass', models.JSONField(blank=True, default=list, help_text='Tests that must stay green')),
                        ('metadata', models.JSONField(blank=True, default=dict)),
                        ('payload', models.JSONField(blank=True, default=dict, help_text="The fields the dataset's kind reads")),
                        ('category', models.CharField(blank=True, help_text='e.g. a Jeopardy category or MMLU subject', max_length=200)),
                        ('difficulty', models.CharField(blank=True, help_text="e.g. a Jeopardy clue's value", max_length=50)),
                        ('quarantined', models.BooleanField(default=False)),
                        ('quarantine_reason', models.TextField(blank=True)),
                        ('gold_status', models.CharField(blank=True, choices=[('resolved', 'gold resolves it'), ('unresolved', 'gold does not resolve it'), ('flaky', 'gold flips between runs'), ('trivial', 'the empty patch resolves it too'), ('error', 'could not be checked')], help_text='What validate_gold found; empty: not checked', max_length=16)),
                        ('gold_detail', models.TextField(blank=True, help_text="How each gold run went, and the empty patch's run if asked")),
                        ('gold_checked_at', models.DateTimeField(blank=True, null=True)),
                        ('dataset_version', models.PositiveIntegerField(default=1, help_text='The dataset version that added it')),
                        ('dataset', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tasks', to='datasets.dataset')),
                    ],
                    options={
                        'db_table': 'experiments_taskinstance',
                        'ordering': ['dataset', 'position', 'external_id'],
                    },
                ),
                migrations.CreateModel(
                    name='MinedCandidate',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('repo', models.CharField(help_text='owner/name the commit was mined from', max_length=200)),
                        ('commit', models.CharField(max_length=64)),
                        ('subject', models.CharField(blank=True, max_length=300)),
                        ('kept', models.BooleanField()),
                        ('reason', models.TextField(blank=True, help_text='Why it was rejected, or why its task is quarantined')),
                        ('log_tail', models.TextField(blank=True, help_text='The last lines of the test log that decided it')),
                        ('decided_at', models.DateTimeField(auto_now=True)),
                        ('dataset', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='mined_candidates', to='datasets.dataset')),
                        ('task', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='datasets.taskinstance')),
                    ],
                    options={
                        'db_table': 'experiments_minedcandidate',
                        'ordering': ['dataset', '-decided_at'],
                    },
                ),
                migrations.CreateModel(
                    name='TaskUpload',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('code', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('dataset_name', models.CharField(help_text='The dataset it goes into (created if new)', max_length=200)),
                        ('format', models.CharField(max_length=32)),
                        ('field_map', models.JSONField(blank=True, default=dict, help_text="jsonl/csv: the kind's field -> the file's")),
                        ('kind', models.CharField(blank=True, help_text='jsonl/csv: the kind the mapped fields make', max_length=32)),
                        ('file_name', models.CharField(max_length=300)),
                        ('data', models.BinaryField(blank=True, help_text="The file's bytes, until the import ends")),
                        ('size', models.PositiveBigIntegerField(help_text='Bytes uploaded')),
                        ('sha256', models.CharField(max_length=64)),
                        ('status', models.CharField(choices=[('checking', 'checking'), ('ready', 'ready to import'), ('rejected', 'rejected'), ('importing', 'importing'), ('imported', 'imported'), ('failed', 'failed')], default='checking', max_length=16)),
                        ('preview', models.JSONField(blank=True, default=dict, help_text="The check's findings: kind, first rows, problems")),
                        ('lines_total', models.PositiveIntegerField(default=0)),
                        ('lines_read', models.PositiveIntegerField(default=0, help_text='How far the job has read the file')),
                        ('saving', models.BooleanField(default=False, help_text='Read and checked: its tasks are being saved')),
                        ('imported', models.PositiveIntegerField(default=0)),
                        ('version', models.PositiveIntegerField(blank=True, help_text='The dataset version the import made', null=True)),
                        ('problems', models.JSONField(blank=True, default=list, help_text='Why the import failed')),
                        ('job_id', models.CharField(blank=True, max_length=100)),
                        ('claim_token', models.UUIDField(blank=True, editable=False, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                        ('dataset', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='uploads', to='datasets.dataset')),
                        ('org', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='task_uploads', to='orgs.organization')),
                    ],
                    options={
                        'db_table': 'experiments_taskupload',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.AddConstraint(
                    model_name='dataset',
                    constraint=models.UniqueConstraint(fields=('org', 'name'), name='dataset_name_per_org'),
                ),
                migrations.AddConstraint(
                    model_name='miningsource',
                    constraint=models.UniqueConstraint(fields=('name', 'path'), name='one_mining_source_per_path'),
                ),
                migrations.AddConstraint(
                    model_name='taskinstance',
                    constraint=models.UniqueConstraint(fields=('dataset', 'external_id'), name='task_id_per_dataset'),
                ),
                migrations.AddConstraint(
                    model_name='minedcandidate',
                    constraint=models.UniqueConstraint(fields=('dataset', 'repo', 'commit'), name='mined_candidate_per_dataset'),
                ),
            ],
        ),
    ]
