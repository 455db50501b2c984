"""Experiments saved in the browser before line endings were normalised hold their template
with CRLF, so a question experiment left with the pre-filled pull-request prompt kept it (the
form compared it with the default byte for byte) and would send "Repository files:
{{repository}}" to the model. Normalise every template, and give a question experiment still
holding the untouched pull-request default its kind's own default, as the form meant to."""

from django.db import migrations


def fit_templates(apps, schema_editor):
    from evaluation.workloads import workload_for
    from evaluation.workloads.pr_patch import DEFAULT_PROMPT as PULL_REQUEST_PROMPT

    Experiment = apps.get_model("experiments", "Experiment")
    for experiment in Experiment.objects.select_related("dataset").iterator():
        template = experiment.prompt_template.replace("\r\n", "\n").replace("\r", "\n")
        if template.strip() == PULL_REQUEST_PROMPT.strip() and experiment.dataset.kind != "pr_patch":
            template = workload_for(experiment.dataset.kind).default_prompt
        if template != experiment.prompt_template:
            experiment.prompt_template = template
            experiment.save(update_fields=["prompt_template"])


class Migration(migrations.Migration):
    dependencies = [("experiments", "0037_attempt_extracted_answer")]
    operations = [migrations.RunPython(fit_templates, migrations.RunPython.noop)]
