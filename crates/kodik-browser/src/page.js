// Injected into every page the browser tool looks at. It is evaluated as an expression that
// returns the helper object, installed once per document as `window.__kodik`. Everything the
// model sees about a page (snapshot lines, locator matches, element descriptions) is computed
// here, in one round trip, because per-node CDP calls cost ~1 ms each and a page has thousands.
(() => {
  if (window.__kodik && window.__kodik.version === 1) return window.__kodik;
  const K = { version: 1, refs: new Map(), elRef: new WeakMap(), latest: new Set(), next: 1, prefix: '', cross: [] };

  const norm = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + '…' : s);

  const INPUT_ROLES = {
    button: 'button', submit: 'button', reset: 'button', image: 'button', checkbox: 'checkbox',
    radio: 'radio', range: 'slider', number: 'spinbutton', search: 'searchbox', file: 'button',
  };
  const TAG_ROLES = {
    BUTTON: 'button', TEXTAREA: 'textbox', H1: 'heading', H2: 'heading', H3: 'heading', H4: 'heading',
    H5: 'heading', H6: 'heading', UL: 'list', OL: 'list', LI: 'listitem', NAV: 'navigation', MAIN: 'main',
    TABLE: 'table', TR: 'row', TD: 'cell', TH: 'columnheader', DIALOG: 'dialog', OPTION: 'option',
    SUMMARY: 'button', ARTICLE: 'article', ASIDE: 'complementary', HEADER: 'banner', FOOTER: 'contentinfo',
    P: 'paragraph', IFRAME: 'iframe', FIELDSET: 'group', PROGRESS: 'progressbar', DETAILS: 'group',
  };

  function role(el) {
    const explicit = el.getAttribute && el.getAttribute('role');
    if (explicit) return explicit.split(' ')[0];
    const tag = el.tagName;
    if (tag === 'A') return el.hasAttribute('href') ? 'link' : null;
    if (tag === 'INPUT') {
      const t = (el.getAttribute('type') || 'text').toLowerCase();
      if (t === 'hidden') return null;
      return INPUT_ROLES[t] || 'textbox';
    }
    if (tag === 'SELECT') return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
    if (tag === 'IMG') return el.getAttribute('alt') === '' ? null : 'img';
    if (tag === 'FORM') return el.getAttribute('aria-label') || el.getAttribute('name') ? 'form' : null;
    if (tag === 'SECTION') return el.getAttribute('aria-label') ? 'region' : null;
    if (el.isContentEditable && el.getAttribute('contenteditable') !== null) return 'textbox';
    return TAG_ROLES[tag] || null;
  }

  const ACTIONABLE = new Set(['button', 'link', 'textbox', 'searchbox', 'checkbox', 'radio', 'combobox', 'listbox',
    'option', 'slider', 'spinbutton', 'switch', 'tab', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'treeitem',
    'iframe']);
  // Roles whose name comes from their content: the line says it, so the content is not repeated.
  const LEAF = new Set(['button', 'link', 'heading', 'option', 'img', 'textbox', 'searchbox', 'checkbox', 'radio',
    'slider', 'spinbutton', 'switch', 'tab', 'menuitem', 'combobox', 'progressbar']);

  function textOf(node) {
    let out = '';
    const walk = (n) => {
      if (n.nodeType === 3) { out += n.nodeValue; return; }
      if (n.nodeType !== 1) return;
      if (hidden(n)) return;
      if (n.tagName === 'SLOT') { n.assignedNodes({ flatten: true }).forEach(walk); return; }
      if (n.shadowRoot) { n.shadowRoot.childNodes.forEach(walk); return; }
      if (n.tagName === 'IMG') { out += ' ' + (n.getAttribute('alt') || '') + ' '; return; }
      n.childNodes.forEach(walk);
      if (/^(DIV|P|LI|TD|TH|BR|H[1-6])$/.test(n.tagName)) out += ' ';
    };
    walk(node);
    return norm(out);
  }

  function byIds(el, attr) {
    const ids = (el.getAttribute(attr) || '').split(/\s+/).filter(Boolean);
    const root = el.getRootNode();
    return norm(ids.map((id) => { const t = root.getElementById ? root.getElementById(id) : null; return t ? textOf(t) : ''; }).join(' '));
  }

  function name(el, r) {
    if (el.hasAttribute('aria-labelledby')) { const n = byIds(el, 'aria-labelledby'); if (n) return n; }
    const aria = el.getAttribute('aria-label');
    if (aria && norm(aria)) return norm(aria);
    const tag = el.tagName;
    if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT') {
      if (el.labels && el.labels.length) {
        return norm(Array.from(el.labels).map((l) => textOf(l)).join(' '));
      }
      const t = (el.getAttribute('type') || '').toLowerCase();
      if (['button', 'submit', 'reset'].includes(t)) return norm(el.value || (t === 'submit' ? 'Submit' : t === 'reset' ? 'Reset' : ''));
      if (t === 'image') return norm(el.getAttribute('alt') || '');
      return norm(el.getAttribute('title') || el.getAttribute('placeholder') || '');
    }
    if (tag === 'IMG') return norm(el.getAttribute('alt') || el.getAttribute('title') || '');
    if (tag === 'IFRAME') return norm(el.getAttribute('title') || el.getAttribute('name') || '');
    if (LEAF.has(r) || r === 'cell' || r === 'columnheader' || r === 'listitem' || r === 'row') return textOf(el);
    return norm(el.getAttribute('title') || '');
  }

  function hidden(el) {
    if (el.nodeType !== 1) return false;
    if (el.hidden || el.getAttribute('aria-hidden') === 'true') return true;
    if (/^(SCRIPT|STYLE|NOSCRIPT|TEMPLATE|HEAD|META|LINK)$/.test(el.tagName)) return true;
    const s = el.ownerDocument.defaultView.getComputedStyle(el);
    if (s.display === 'none') return true;
    if (s.visibility === 'hidden' && !el.children.length) return true;
    return false;
  }

  function visible(el) {
    if (!el.isConnected || hidden(el)) return false;
    const r = el.getBoundingClientRect();
    const s = el.ownerDocument.defaultView.getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden';
  }

  function disabled(el) {
    return !!(el.disabled || el.getAttribute('aria-disabled') === 'true' || (el.closest && el.closest('fieldset[disabled]')));
  }

  function refFor(el) {
    let r = K.elRef.get(el);
    if (!r) {
      r = K.prefix + 'e' + K.next++;
      K.elRef.set(el, r);
      K.refs.set(r, new WeakRef(el));
    }
    K.latest.add(r);
    return r;
  }

  function states(el, r) {
    const out = [];
    if (r === 'heading') out.push('level=' + (el.tagName.match(/H(\d)/) || [0, el.getAttribute('aria-level') || 2])[1]);
    if (r === 'checkbox' || r === 'radio' || r === 'switch') {
      const c = el.getAttribute('aria-checked');
      if (el.checked || c === 'true') out.push('checked');
      else if (c === 'mixed' || el.indeterminate) out.push('checked=mixed');
    }
    if (disabled(el)) out.push('disabled');
    if (el.getAttribute('aria-expanded')) out.push('expanded=' + el.getAttribute('aria-expanded'));
    if (el.tagName === 'DETAILS') out.push(el.open ? 'expanded' : 'collapsed');
    if (el.getAttribute('aria-selected') === 'true' || (el.tagName === 'OPTION' && el.selected)) out.push('selected');
    if (el.required) out.push('required');
    if (el.ownerDocument.activeElement === el && el.tagName !== 'BODY') out.push('focused');
    return out;
  }

  function quote(s) { return JSON.stringify(s); }

  // The snapshot: one line per meaningful node, indented by depth; generic wrappers are
  // flattened away so the model pays only for what it can read or act on.
  // `prefix` is the frame key of a cross-origin frame's document (`f2`), so its refs say where
  // they live. Such frames cannot be entered from here: each becomes a marker line `\u0001N`
  // (N indexes K.cross) that the host replaces with the frame's own snapshot.
  function snapshot(start, prefix) {
    K.latest = new Set();
    K.cross = [];
    K.prefix = prefix || '';
    if (start > K.next) K.next = start;
    const lines = [];
    let count = 0;
    const MAX = 20000;
    const emitText = (text, depth) => {
      const t = norm(text);
      if (t && lines.length < MAX) lines.push('  '.repeat(depth) + '- text: ' + clip(t, 300));
    };
    const children = (n) => {
      if (n.shadowRoot) return Array.from(n.shadowRoot.childNodes);
      if (n.tagName === 'SLOT') return n.assignedNodes({ flatten: true });
      return Array.from(n.childNodes);
    };
    const walkChildren = (n, depth) => {
      let pending = '';
      for (const c of children(n)) {
        if (c.nodeType === 3) { pending += c.nodeValue; continue; }
        if (c.nodeType !== 1) continue;
        if (/^(B|I|EM|STRONG|SPAN|SMALL|CODE|ABBR|MARK|SUP|SUB|TIME|U|S|Q|KBD)$/.test(c.tagName) && !c.shadowRoot && !role(c)
            && !c.querySelector('a,button,input,select,textarea,[role],[tabindex],[onclick]') && !hidden(c)) {
          pending += textOf(c) + ' ';
          continue;
        }
        if (c.tagName === 'BR') { pending += ' '; continue; }
        if (norm(pending)) emitText(pending, depth);
        pending = '';
        walk(c, depth);
      }
      if (norm(pending)) emitText(pending, depth);
    };
    const walk = (el, depth) => {
      if (lines.length >= MAX || hidden(el)) return;
      const r = role(el);
      const clickable = !r && (el.hasAttribute('onclick') || el.getAttribute('tabindex') === '0' || el.getAttribute('draggable') === 'true');
      if (!r && !clickable) { walkChildren(el, depth); return; }
      const rr = r || 'generic';
      const nm = name(el, rr);
      let line = '  '.repeat(depth) + '- ' + rr;
      if (nm && !(rr === 'listitem' || rr === 'paragraph' || rr === 'cell' || rr === 'row' || rr === 'columnheader')) line += ' ' + quote(clip(nm, 200));
      for (const s of states(el, rr)) line += ' [' + s + ']';
      if (ACTIONABLE.has(rr) || clickable || el.hasAttribute('tabindex')) { line += ' [ref=' + refFor(el) + ']'; count++; }
      if (rr === 'link') { const h = el.getAttribute('href'); if (h && !h.startsWith('javascript:')) line += ' [url=' + clip(h, 200) + ']'; }
      const ph = el.getAttribute('placeholder');
      if (ph && nm !== norm(ph)) line += ' [placeholder=' + quote(clip(norm(ph), 100)) + ']';
      if (el.tagName === 'INPUT' && el.type === 'file' && el.files && el.files.length) line += ': ' + quote(Array.from(el.files).map((f) => f.name).join(', '));
      else if ((rr === 'textbox' || rr === 'searchbox' || rr === 'spinbutton' || rr === 'slider') && (el.value || el.isContentEditable)) {
        const v = el.type === 'password' ? '•'.repeat(Math.min((el.value || '').length, 8)) : (el.value ?? textOf(el));
        if (v) line += ': ' + quote(clip(v, 300));
      } else if ((rr === 'combobox' || rr === 'listbox') && el.tagName === 'SELECT') {
        const sel = Array.from(el.selectedOptions).map((o) => norm(o.textContent));
        line += ': ' + quote(sel.join(', '));
        const opts = Array.from(el.options).map((o) => norm(o.textContent));
        line += ' [options: ' + clip(opts.map(quote).join(', '), 400) + ']';
      }
      if (rr === 'iframe') {
        lines.push(line);
        let doc = null;
        try { doc = el.contentDocument; } catch (e) {}
        if (doc && doc.body) walkChildren(doc.body, depth + 1);
        else if (!doc) { K.cross.push(el); lines.push('  '.repeat(depth + 1) + '\u0001' + (K.cross.length - 1)); }
        return;
      }
      if (LEAF.has(rr) && rr !== 'combobox') { lines.push(line); return; }
      if (['listitem', 'paragraph', 'cell', 'columnheader', 'row', 'generic'].includes(rr)) {
        // A container with only text says it inline, as Playwright does.
        const onlyText = !el.shadowRoot && !el.querySelector('a,button,input,select,textarea,img,[role],[tabindex],[onclick],li,p,div,iframe');
        if (onlyText) { const t = textOf(el); if (t) line += ': ' + clip(t, 300); lines.push(line); return; }
      }
      if (rr === 'listbox' || rr === 'combobox') { lines.push(line); return; }
      lines.push(line);
      walkChildren(el, depth + 1);
    };
    const body = document.body || document.documentElement;
    walkChildren(body, 0);
    if (lines.length >= MAX) lines.push('- text: (snapshot cut at ' + MAX + ' lines)');
    return { text: lines.join('\n'), refs: count, next: K.next, url: location.href, title: document.title, cross: K.cross.length };
  }

  // Every document the locator searches: the top one, open shadow roots, same-origin frames.
  function roots(doc) {
    const out = [];
    const visit = (root) => {
      out.push(root);
      const all = root.querySelectorAll('*');
      for (const el of all) {
        if (el.shadowRoot) visit(el.shadowRoot);
        if (el.tagName === 'IFRAME') {
          let d = null;
          try { d = el.contentDocument; } catch (e) {}
          if (d && d.documentElement) visit(d);
        }
      }
    };
    visit(doc);
    return out;
  }

  function frameDoc(spec) {
    if (!spec) return { doc: document };
    const frames = roots(document).flatMap((r) => Array.from(r.querySelectorAll('iframe')));
    let hits = frames.filter((f) => f.name === spec || f.id === spec || (f.getAttribute('title') || '') === spec);
    if (!hits.length) hits = frames.filter((f) => (f.src || '').includes(spec));
    if (!hits.length) { try { hits = Array.from(document.querySelectorAll(spec)).filter((f) => f.tagName === 'IFRAME'); } catch (e) {} }
    if (hits.length === 0) return { error: 'no frame matches ' + quote(spec) + '; frames here: ' + (frames.map((f) => quote(f.name || f.id || f.src)).join(', ') || 'none') };
    if (hits.length > 1) return { error: hits.length + ' frames match ' + quote(spec) + ': ' + hits.map((f) => quote(f.name || f.id || f.src)).join(', ') };
    let d = null;
    try { d = hits[0].contentDocument; } catch (e) {}
    // A cross-origin frame is searched by the host in the frame's own context.
    if (!d) { K.crossHit = hits[0]; return { xframe: true }; }
    return { doc: d };
  }

  function describe(el) {
    const r = role(el) || el.tagName.toLowerCase();
    const n = name(el, r);
    let s = r + (n ? ' ' + quote(clip(n, 80)) : '');
    if (!visible(el)) s += ' (hidden)';
    return s + ' [ref=' + refFor(el) + ']';
  }

  const eq = (a, b) => norm(a).toLowerCase() === norm(b).toLowerCase();
  const has = (a, b) => norm(a).toLowerCase().includes(norm(b).toLowerCase());

  // Strict locators: exact (case-insensitive, whitespace-normalized) matches win; substring
  // matches are used only when nothing matches exactly. Never the first of several.
  function locate(t) {
    if (t.ref) {
      const w = K.refs.get(t.ref);
      const el = w && w.deref();
      if (!K.latest.has(t.ref) || !el) return { error: 'stale', detail: 'ref ' + t.ref + ' is not in the latest snapshot of this page' };
      if (!el.isConnected) return { error: 'stale', detail: 'ref ' + t.ref + ' was removed from the page since the snapshot' };
      return { el };
    }
    const fd = frameDoc(t.frame);
    if (fd.xframe) return { error: 'xframe' };
    if (fd.error) return { error: 'frame', detail: fd.error };
    const all = [];
    for (const r of roots(fd.doc)) for (const el of r.querySelectorAll('*')) all.push(el);
    let what, exact = [], loose = [];
    const pick = (get, value) => {
      for (const el of all) {
        const v = get(el);
        if (v == null) continue;
        if (eq(v, value)) exact.push(el); else if (has(v, value)) loose.push(el);
      }
    };
    if (t.role) {
      what = 'role=' + t.role + (t.name != null ? ' name=' + quote(t.name) : '');
      for (const el of all) {
        if (role(el) !== t.role || hidden(el)) continue;
        if (t.name == null) { exact.push(el); continue; }
        const n = name(el, t.role);
        if (eq(n, t.name)) exact.push(el); else if (has(n, t.name)) loose.push(el);
      }
      if (!exact.length && !loose.length) {
        const near = all.filter((el) => role(el) === t.role && !hidden(el)).slice(0, 10);
        return { error: 'none', detail: 'no element matches ' + what + (near.length ? '; elements with role ' + t.role + ': ' + near.map(describe).join(', ') : '') };
      }
    } else if (t.label) {
      what = 'label=' + quote(t.label);
      pick((el) => (/^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName) || el.isContentEditable || el.getAttribute('role')) && !hidden(el) && el.type !== 'hidden'
        ? (el.labels && el.labels.length ? Array.from(el.labels).map(textOf).join(' ') : el.getAttribute('aria-label') || (el.hasAttribute('aria-labelledby') ? byIds(el, 'aria-labelledby') : null)) : null, t.label);
    } else if (t.placeholder) {
      what = 'placeholder=' + quote(t.placeholder);
      pick((el) => (hidden(el) ? null : el.getAttribute('placeholder')), t.placeholder);
    } else if (t.text) {
      what = 'text=' + quote(t.text);
      // The innermost elements whose text matches: a button, not the form around it.
      const match = (el, f) => !hidden(el) && !/^(HTML|BODY|HEAD)$/.test(el.tagName) && f(textOf(el), t.text);
      for (const [f, out] of [[eq, exact], [has, loose]]) {
        const hits = all.filter((el) => match(el, f));
        const set = new Set(hits);
        for (const el of hits) {
          const inner = Array.from(el.querySelectorAll('*')).some((c) => set.has(c))
            || (el.shadowRoot && Array.from(el.shadowRoot.querySelectorAll('*')).some((c) => set.has(c)));
          if (!inner) out.push(el);
        }
      }
    } else if (t.test_id) {
      what = 'test_id=' + quote(t.test_id);
      exact = all.filter((el) => el.getAttribute('data-testid') === t.test_id);
    } else if (t.href) {
      what = 'href=' + quote(t.href);
      exact = all.filter((el) => el.tagName === 'A' && (el.getAttribute('href') === t.href || el.href === t.href));
    } else if (t.css) {
      what = 'css=' + quote(t.css);
      try { for (const r of roots(fd.doc)) exact.push(...r.querySelectorAll(t.css)); } catch (e) { return { error: 'css', detail: 'invalid CSS selector ' + quote(t.css) + ': ' + e.message }; }
    } else {
      return { error: 'none', detail: 'the target names no element' };
    }
    const found = exact.length ? exact : loose;
    if (found.length === 1) return { el: found[0] };
    if (!found.length) return { error: 'none', detail: 'no element matches ' + what + (t.frame ? ' in frame ' + quote(t.frame) : '') };
    const shown = found.slice(0, 10).map(describe);
    return { error: 'ambiguous', detail: found.length + ' elements match ' + what + ': ' + shown.join(', ') + (found.length > 10 ? ', …' : '') };
  }

  // The element's box in top-level viewport coordinates, through frame offsets.
  function box(el) {
    const r = el.getBoundingClientRect();
    let x = r.left, y = r.top;
    let win = el.ownerDocument.defaultView;
    while (win && win.frameElement) {
      const fr = win.frameElement.getBoundingClientRect();
      x += fr.left + win.frameElement.clientLeft;
      y += fr.top + win.frameElement.clientTop;
      win = win.parent;
    }
    return { x, y, width: r.width, height: r.height };
  }

  // Things only the user should do (B11): a CAPTCHA, a passkey prompt, a one-time code.
  function takeover() {
    const frames = roots(document).flatMap((r) => Array.from(r.querySelectorAll('iframe')));
    const cap = frames.find((f) => /recaptcha|hcaptcha|challenges\.cloudflare\.com|turnstile|arkoselabs|funcaptcha/i.test(f.src || ''));
    if (cap) return 'a CAPTCHA (' + (cap.src.match(/recaptcha|hcaptcha|cloudflare|turnstile|arkoselabs|funcaptcha/i) || ['frame'])[0] + ')';
    if (document.querySelector('.g-recaptcha, .h-captcha, .cf-turnstile, [data-sitekey]')) return 'a CAPTCHA widget';
    if (window.__kodikWebauthn) { const k = window.__kodikWebauthn; window.__kodikWebauthn = null; return 'a passkey prompt (navigator.credentials.' + k + ')'; }
    const otp = roots(document).flatMap((r) => Array.from(r.querySelectorAll('input[autocomplete="one-time-code"]'))).find(visible);
    if (otp) return 'a one-time code (MFA) field ' + describe(otp);
    return null;
  }

  K.takeover = takeover;
  K.snapshot = snapshot;
  K.locate = locate;
  K.describe = describe;
  K.box = box;
  K.visible = visible;
  K.disabled = disabled;
  K.textOf = textOf;
  K.role = role;
  K.name = name;
  K.norm = norm;
  window.__kodik = K;
  return K;
})()
