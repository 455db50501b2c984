// An arm's model input suggests ids for the provider chosen in the same row: the page points
// each row at its provider's <datalist> when rendered; this keeps it right when the select changes.
document.addEventListener("change", function (event) {
  var select = event.target;
  if (!(select instanceof HTMLSelectElement) || !/-provider$/.test(select.name)) return;
  var model = document.getElementsByName(select.name.replace(/-provider$/, "-model_name"))[0];
  if (!model) return;
  var list = document.getElementById("model-suggestions-" + select.value);
  model.setAttribute("list", list ? list.id : "model-suggestions");
});
