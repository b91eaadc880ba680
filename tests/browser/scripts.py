"""The JavaScript that ``check.py`` runs inside JupyterLab (``window.jupyterapp``, exposed by the test's config).

Cell numbers count every cell from 1, as a learner would.
"""

# The open notebook: None while it loads, else its kernel's status, whether it is ready, and its cell count.
JS_PANEL = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext || !panel.content.widgets.length) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {kernel: kernel ? kernel.status : 'none', ready: panel.context.isReady, cells: panel.content.widgets.length};
}"""


# The kernel's status and how many cells are queued or running ("[*]").
JS_RUN_STATE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const prompts = [...panel.content.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent);
  return {kernel: kernel ? kernel.status : 'none', pending: prompts.filter(t => t.includes('*')).length};
}"""


# One entry per problem: {cell, source (its first line), kind, text}.
JS_PROBLEMS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const found = [];
  const first = (s) => (s || '').trim().split('\\n').filter(l => l.trim())[0] || '';
  panel.content.widgets.forEach((cell, i) => {
    const where = {cell: i + 1, source: first(cell.model.sharedModel.getSource()).slice(0, 80)};
    const add = (kind, text) => found.push({...where, kind, text: (text || '').slice(0, 600)});
    if (cell.model.type === 'code') {
      const outputs = cell.model.outputs.toJSON();
      for (const o of outputs) {
        if (o.output_type === 'error') add('error output', o.ename + ': ' + o.evalue);
      }
      if (cell.model.sharedModel.getSource().trim() && cell.model.executionCount === null) add('did not run', '');
      for (const el of cell.node.querySelectorAll(
          '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')) {
        if (el.textContent.includes('Traceback')) add('traceback shown', el.textContent);
      }
      const area = cell.node.querySelector('.jp-Cell-outputWrapper');
      const text = area ? area.textContent : '';
      const bad = text.match(/Error displaying widget[^\\n]*/);
      if (bad) add('widget error', bad[0]);
      // ipywidgets 8 draws a view that failed to load as a broken-file icon; a click reveals the message.
      for (const el of cell.node.querySelectorAll('.jupyter-widgets-error-widget')) {
        if (el.classList.contains('icon-error') && el.parentElement) el.parentElement.click();
        const lines = el.innerText.split('\\n').map(l => l.trim()).filter(l => l && !l.startsWith('['));
        add('widget error', 'Error displaying widget: ' + (lines[0] || 'a widget view failed to load'));
      }
      if (text.includes('Loading widget...')) add('widget never loaded', 'still "Loading widget..."');
    } else if (cell.model.type === 'markdown') {
      for (const el of cell.node.querySelectorAll('mjx-merror, .MathJax_Error')) {
        add('LaTeX error', (el.getAttribute('data-mjx-error') || 'error') + ' in ' + el.textContent);
      }
      // Pictures served by this server (the notebooks' own files) that did not load; external ones are blocked.
      for (const img of cell.node.querySelectorAll('.jp-RenderedMarkdown img')) {
        const url = new URL(img.getAttribute('src') || '', location.href);
        if (url.host === location.host && img.complete && !img.naturalWidth) {
          add('broken image', decodeURIComponent(url.pathname.split('/files/').pop()));
        }
      }
    }
  });
  return found;
}"""


# Marks every explorer (a code cell whose output has a widget Output and a control) and returns their count.
JS_MARK_EXPLORERS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  let count = 0;
  panel.content.widgets.forEach((cell, i) => {
    if (cell.model.type !== 'code') return;
    const area = cell.node.querySelector('.jp-Cell-outputWrapper');
    if (!area || !area.querySelector('.widget-output')) return;
    if (!area.querySelector('.widget-slider, .widget-hslider, .widget-dropdown, .widget-checkbox, '
                            + '.widget-toggle-buttons, .widget-radio-box')) return;
    cell.node.setAttribute('data-course-explorer', String(count));
    cell.node.setAttribute('data-course-cell', String(i + 1));
    count += 1;
  });
  return count;
}"""


# An explorer's figure as it is now: its image sources (or its markup, for a figure that is not an image).
JS_FIGURE_SIGNATURE = """(cell) => {
  const outs = [...cell.querySelectorAll('.widget-output')];
  const imgs = outs.flatMap(o => [...o.querySelectorAll('img')].map(i => i.getAttribute('src') || ''));
  if (imgs.length) return imgs.join('|');
  return outs.map(o => o.querySelector('svg, canvas, .jp-OutputArea') ? o.innerHTML : '').join('|');
}"""


JS_EXPLORER_BOX = """(cell) => {
  // The smallest rectangle around what the explorer draws (title, controls, figure), for a README picture.
  const root = cell.querySelector('.jp-OutputArea-output .jupyter-widgets') || cell;
  let box = null;
  for (const el of root.querySelectorAll('*')) {
    if (el.children.length && el.tagName !== 'SELECT') continue;
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    box = box ? {l: Math.min(box.l, r.left), t: Math.min(box.t, r.top), r: Math.max(box.r, r.right),
                 b: Math.max(box.b, r.bottom)} : {l: r.left, t: r.top, r: r.right, b: r.bottom};
  }
  return box && {x: Math.max(box.l - 8, 0), y: Math.max(box.t - 8, 0), width: box.r - box.l + 16,
                 height: box.b - box.t + 16};
}"""


# Where the keyboard focus is, seen from an explorer's cell: {inside, kind, value, label, fixed} (kind: slider,
# dropdown, checkbox, button, radio, or other for a focusable element that is not a control, e.g. a readout).
JS_FOCUS = """(cell) => {
  const el = document.activeElement;
  if (!el || !cell.contains(el)) return {inside: false, kind: '', value: '', label: el ? el.tagName : ''};
  const box = el.closest('.widget-inline-hbox, .widget-box, .jupyter-widgets') || el;
  let label = ((box.querySelector('.widget-label') || {}).textContent || '').replace(/\u200b/g, '');
  if (!label.trim()) label = box.textContent.replace(/\u200b/g, '');  // a checkbox's description follows it
  let kind = 'other', value = '';
  if (el.getAttribute('role') === 'slider') { kind = 'slider'; value = el.getAttribute('aria-valuenow'); }
  else if (el.tagName === 'SELECT') { kind = 'dropdown'; value = el.value; }
  else if (el.type === 'checkbox') { kind = 'checkbox'; value = String(el.checked); }
  else if (el.type === 'radio') { kind = 'radio'; value = String(el.checked); }
  else if (el.tagName === 'BUTTON') { kind = 'button'; value = String(el.classList.contains('mod-active')); }
  // A control with one possible value (a drop-down of one option) has nothing to change.
  const fixed = (kind === 'dropdown' && el.options.length < 2) ||
                (kind === 'slider' && el.getAttribute('aria-valuemin') === el.getAttribute('aria-valuemax'));
  return {inside: true, kind, value: String(value), label: label.trim(), fixed};
}"""

# Where a learner's keyboard focus arrives at an explorer: its outermost widget box (focusable for the test only).
JS_FOCUS_EXPLORER = """(cell) => {
  const root = cell.querySelector('.jp-OutputArea-output .jupyter-widgets');
  if (!root) return false;
  root.setAttribute('tabindex', '-1');
  root.focus();
  return document.activeElement === root;
}"""


# The links of the rendered markdown cells, once each is rendered ({cell, path, fragment, text}: JupyterLab
# rewrites a link to another file as that file's /files/ address, the path relative to the server's root), and
# the anchors of the notebook: what JupyterLab looks a #fragment up by (data-jupyter-id of a heading, an id).
JS_LINKS_AND_ANCHORS = """async () => {
  const panel = window.jupyterapp.shell.currentWidget;
  // JupyterLab renders a markdown cell's HTML when it first comes into view: bring each one into view first.
  for (const cell of panel.content.widgets.filter(c => c.model.type === 'markdown')) {
    cell.node.scrollIntoView();
    for (let i = 0; i < 40 && !cell.node.querySelector('.jp-RenderedMarkdown *:not(:empty)'); i++) {
      await new Promise(r => setTimeout(r, 25));
    }
  }
  const root = panel.content.node;
  const ids = [...root.querySelectorAll('[data-jupyter-id]')].map(e => e.getAttribute('data-jupyter-id'));
  ids.push(...[...root.querySelectorAll('[id]')].map(e => e.id));
  ids.push(...[...root.querySelectorAll('a[name]')].map(a => a.getAttribute('name')));
  const links = [];
  panel.content.widgets.forEach((cell, i) => {
    if (cell.model.type !== 'markdown') return;
    for (const a of cell.node.querySelectorAll('.jp-RenderedMarkdown a[href]')) {
      if (a.classList.contains('jp-InternalAnchorLink')) continue;  // a heading's own pilcrow
      const raw = a.getAttribute('href');
      const url = new URL(raw, location.href);
      let path = '';
      if (raw.startsWith('#')) path = '';
      else if (url.origin === location.origin && url.pathname.includes('/files/')) {
        path = decodeURIComponent(url.pathname.split('/files/').slice(1).join('/files/'));
      } else continue;  // a web address
      links.push({cell: i + 1, path, fragment: decodeURIComponent(url.hash.replace(/^#/, '')),
                  text: a.textContent.trim().slice(0, 80)});
    }
  });
  return {ids, links};
}"""


# True once the open notebook is loaded and every markdown cell shows its rendered markdown (with heading ids);
# a notebook without markdown cells never is.
JS_MARKDOWN_RENDERED = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.context || !panel.context.isReady) return false;
  const cells = panel.content.widgets.filter(c => c.model.type === 'markdown');
  return cells.length > 0 && cells.every(c => c.node.querySelector('.jp-RenderedMarkdown') &&
                          c.node.querySelector('.jp-RenderedMarkdown').childElementCount > 0);
}"""
