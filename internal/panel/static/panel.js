// switchboard panel: the little the pages need beyond HTML. Loaded as an external file
// because the Content-Security-Policy allows no inline script.
'use strict';

(function () {
  var body = document.body;

  // A page that shows a key answers a POST. Replace that history entry with the plain page,
  // so that reloading shows the table (without the key) instead of posting the form again.
  if (body.dataset.replaceUrl) {
    history.replaceState(null, '', body.dataset.replaceUrl);
  }

  // Copy buttons: data-copy names the field whose value to copy.
  document.querySelectorAll('button[data-copy]').forEach(function (button) {
    var label = button.textContent;
    button.addEventListener('click', function () {
      var field = document.getElementById(button.dataset.copy);
      if (!field) {
        return;
      }
      field.focus();
      field.select();
      var show = function (text, ok) {
        button.textContent = text;
        button.classList.toggle('copied', ok);
        setTimeout(function () {
          button.textContent = label;
          button.classList.remove('copied');
        }, 2500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(field.value).then(
          function () { show('Copied', true); },
          function () { show('Press Ctrl+C', false); });
      } else {
        // Plain HTTP on a remote host is not a secure context: the key is selected instead.
        show('Press Ctrl+C', false);
      }
    });
  });

  // The key field selects itself whole on focus, ready to copy by hand.
  document.querySelectorAll('.keybox input').forEach(function (field) {
    field.addEventListener('focus', function () { field.select(); });
  });

  // Choosing a namespace from the list opens it.
  document.querySelectorAll('select[data-autosubmit]').forEach(function (select) {
    select.addEventListener('change', function () { select.form.submit(); });
  });
})();
