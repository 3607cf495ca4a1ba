// The drill-down filter of the run report (inlined; the page's CSP allows only this
// script, by its hash). It only shows and hides essays: no text is ever inserted as HTML.
(function () {
  "use strict";
  var selects = Array.prototype.slice.call(document.querySelectorAll("#filters select"));
  var prompts = Array.prototype.slice.call(document.querySelectorAll("article.prompt"));
  var count = document.getElementById("filter-count");
  function apply() {
    var want = {};
    selects.forEach(function (s) { want[s.dataset.key] = s.value; });
    var shown = 0, total = 0;
    prompts.forEach(function (prompt) {
      var any = false;
      prompt.querySelectorAll("details.essay").forEach(function (essay) {
        total += 1;
        var keep = selects.every(function (s) {
          var value = want[s.dataset.key];
          return value === "" || essay.dataset[s.dataset.key] === value;
        });
        essay.hidden = !keep;
        if (keep) { any = true; shown += 1; }
      });
      prompt.hidden = !any;
    });
    count.textContent = shown + " of " + total + " essays";
  }
  selects.forEach(function (s) { s.addEventListener("change", apply); });
  apply();
})();
