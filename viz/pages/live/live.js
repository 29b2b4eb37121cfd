// live.js: the live page's controls and painter. It computes nothing of the
// model and lays out no view: the text goes to tscope's C in WebAssembly
// (src/wasm, include/tscope/wasm.h), which runs the model through its cache,
// knocks heads out and lays the views out as a display list; this file
// replays that list on a canvas, writes the next-token bars as page elements,
// and keeps the state in the address (?model=kjv&text=...&knock=1.0,1.1).
'use strict';
(function () {
  const MODELS = { kjv: 'live-kjv.js', induction: 'live-induction.js' };
  const params = new URLSearchParams(location.search);
  const model = MODELS[params.get('model')] ? params.get('model') : 'kjv';
  const $ = id => document.getElementById(id);
  const field = $('text'), status = $('status'), canvas = $('views'), bars = $('bars');
  const temp = $('temp'), tempV = $('temp-v');
  const live = window.tscopeLive = { ready: false, times: [], parts: [], error: null };
  $('m-' + model).classList.add('on');

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = src;
      s.onload = resolve;
      s.onerror = () => reject(new Error('cannot load ' + src));
      document.body.appendChild(s);
    });
  }

  function fromBase64(b64) {
    const bin = atob(b64), out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  async function start() {
    await loadScript(MODELS[model]);
    const M = await window.tscopeWasm();
    M.FS.writeFile('/model.safetensors', fromBase64(window.tscopeLiveModels[model]));
    const c = (name, ret, types, args) => M.ccall(name, ret, types, args);
    const s = c('tsw_open', 'number', ['string'], ['/model.safetensors']);
    if (!s) throw new Error(c('tsw_error', 'string', [], []));
    const L = c('tsw_layers', 'number', ['number'], [s]), H = c('tsw_heads', 'number', ['number'], [s]);
    const V = c('tsw_vocab', 'number', ['number'], [s]);
    const topIds = M._malloc(4 * 10);
    let focus = (L - 1) * H;

    const knockParam = (params.get('knock') || '').split(',').filter(Boolean);
    for (const k of knockParam) {
      const m = /^(\d+)\.(\d+)$/.exec(k);
      if (!m || c('tsw_knock', 'number', ['number', 'number', 'number'], [s, +m[1], +m[2]]) !== 1)
        throw new Error(`knock=${k}: no such head (layers 0-${L - 1}, heads 0-${H - 1})`);
      focus = +m[1] * H + +m[2];
    }

    function knocked() {
      const out = [];
      for (let l = 0; l < L; l++)
        for (let h = 0; h < H; h++) if (c('tsw_knocked', 'number', ['number', 'number', 'number'], [s, l, h])) out.push(`${l}.${h}`);
      return out;
    }

    // ?model=kjv&text=And%20God%20sa&knock=1.0,1.1: readable, and a link a teacher can write by hand
    function remember() {
      const k = knocked();
      history.replaceState(null, '', `?model=${model}&text=${encodeURIComponent(field.value)}` +
                           (k.length ? '&knock=' + k.join(',') : ''));
    }

    // The display list (include/tscope/render.h, ts_dl): 10 floats an op.
    function paint(height) {
      const dpr = window.devicePixelRatio || 1, width = canvas.clientWidth || 800;
      // a new size reallocates the canvas: only when the layout's size changed
      if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
        canvas.style.height = height + 'px';
        canvas.width = Math.round(width * dpr);
        canvas.height = Math.round(height * dpr);
      }
      const g = canvas.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      let font = '';
      g.fillStyle = '#fff';
      g.fillRect(0, 0, width, height);
      const n = c('tsw_dl_count', 'number', ['number'], [s]);
      const ops = M.HEAPF32.subarray(c('tsw_dl_ops', 'number', ['number'], [s]) / 4);
      const text = c('tsw_dl_text', 'number', ['number'], [s]);
      const pixels = c('tsw_dl_pixels', 'number', ['number'], [s]);
      const align = ['left', 'center', 'right'];
      const cells = document.createElement('canvas'), cg = cells.getContext('2d');
      g.imageSmoothingEnabled = false;
      for (let i = 0; i < n; i++) {
        const o = ops.subarray(i * 10, i * 10 + 10);
        const rgb = `rgb(${Math.round(o[5] * 255)},${Math.round(o[6] * 255)},${Math.round(o[7] * 255)})`;
        switch (o[0]) {
          case 1: g.fillStyle = rgb; g.fillRect(o[1], o[2], o[3], o[4]); break;
          case 2: g.strokeStyle = rgb; g.lineWidth = o[8]; g.strokeRect(o[1], o[2], o[3], o[4]); break;
          case 3: g.strokeStyle = rgb; g.lineWidth = o[8]; g.beginPath(); g.moveTo(o[1], o[2]); g.lineTo(o[3], o[4]); g.stroke(); break;
          case 4:
            g.fillStyle = rgb;
            const f = `${o[8] ? 'bold ' : ''}${o[3]}px "DejaVu Sans", sans-serif`;
            if (f !== font) g.font = font = f; // setting a font parses it: only when it changes
            g.textAlign = align[o[4]] || 'left';
            g.textBaseline = 'middle';
            g.fillText(M.UTF8ToString(text + o[9]), o[1], o[2]);
            break;
          case 5: {
            const cols = o[5], rows = o[6];
            if (cells.width !== cols || cells.height !== rows) cells.width = cols, cells.height = rows; // every head is n x n
            cg.putImageData(new ImageData(new Uint8ClampedArray(M.HEAPU8.buffer, pixels + o[9], cols * rows * 4), cols, rows), 0, 0);
            g.drawImage(cells, o[1], o[2], o[3], o[4]);
            break;
          }
          case 6: g.save(); g.beginPath(); g.rect(o[1], o[2], o[3], o[4]); g.clip(); font = ''; break;
          case 7: g.restore(); font = ''; break;
        }
      }
    }

    function drawBars() {
      const T = +temp.value;
      const n = c('tsw_top', 'number', ['number', 'number', 'number', 'number'], [s, T, 10, topIds]);
      const ids = M.HEAP32.subarray(topIds / 4, topIds / 4 + n);
      const pAt = c('tsw_next_probs', 'number', ['number', 'number', 'number'], [s, T, 0]) / 4;
      const after = Array.from(ids, id => M.HEAPF32[pAt + id]);
      const anyOut = c('tsw_n_knocked', 'number', ['number'], [s]) > 0;
      const bAt = anyOut ? c('tsw_next_probs', 'number', ['number', 'number', 'number'], [s, T, 1]) / 4 : 0;
      bars.textContent = '';
      ids.forEach((id, i) => {
        const row = document.createElement('div');
        row.className = 'bar';
        row.dataset.id = id;
        const tok = document.createElement('span');
        tok.className = 'tok';
        tok.textContent = c('tsw_vocab_label', 'string', ['number', 'number'], [s, id]);
        const track = document.createElement('span');
        track.className = 'track';
        const p = document.createElement('span');
        p.className = 'p';
        if (anyOut) {
          const b = M.HEAPF32[bAt + id];
          const before = document.createElement('span');
          before.className = 'before';
          before.style.width = (100 * b) + '%';
          track.appendChild(before);
          p.textContent = `${b.toFixed(3)} \u2192 ${after[i].toFixed(3)}`;
          p.title = 'before the knock-out \u2192 after';
        } else {
          p.textContent = after[i].toFixed(3);
        }
        const a = document.createElement('span');
        a.className = 'after';
        a.style.width = (100 * after[i]) + '%';
        track.appendChild(a);
        row.append(tok, track, p);
        bars.appendChild(row);
      });
    }

    // One keystroke's work: the model, the layout, the painting, the bars.
    function update() {
      const t0 = performance.now();
      if (c('tsw_set_text', 'number', ['number', 'string'], [s, field.value]) !== 0)
        throw new Error(c('tsw_error', 'string', [], []));
      const t1 = performance.now();
      const height = c('tsw_draw', 'number', ['number', 'number', 'number', 'number'],
                       [s, Math.floor(focus / H), focus % H, canvas.clientWidth || 800]);
      const t2 = performance.now();
      paint(height);
      const t3 = performance.now();
      drawBars();
      const ms = performance.now() - t0;
      live.times.push(ms);
      live.parts.push({ model: t1 - t0, layout: t2 - t1, paint: t3 - t2, bars: t0 + ms - t3 });
      const skipped = c('tsw_skipped', 'number', ['number'], [s]);
      status.textContent = `${c('tsw_tokens', 'number', ['number'], [s])} tokens read` +
        (skipped ? `, ${skipped} characters this model does not know left out` : '') +
        ` \u00b7 ${ms.toFixed(1)} ms`;
      remember();
    }

    function append(id) {
      if (id < 0) return;
      field.value += c('tsw_piece', 'string', ['number', 'number'], [s, id]);
      update();
    }

    field.addEventListener('input', update);
    field.addEventListener('keydown', e => {
      if (e.key !== 'Tab') return;
      e.preventDefault();
      append(c('tsw_sample', 'number', ['number', 'number', 'number'], [s, 0, 0]));
    });
    temp.addEventListener('input', () => { tempV.textContent = (+temp.value).toFixed(1); drawBars(); });
    $('sample').addEventListener('click', () => {
      append(c('tsw_sample', 'number', ['number', 'number', 'number'], [s, +temp.value, Math.random()]));
      field.focus();
    });
    canvas.addEventListener('click', e => {
      const r = canvas.getBoundingClientRect();
      const hit = c('tsw_hit', 'number', ['number', 'number', 'number'], [s, e.clientX - r.left, e.clientY - r.top]);
      if (hit < 0) return;
      if (c('tsw_knock', 'number', ['number', 'number', 'number'], [s, Math.floor(hit / H), hit % H]) < 0)
        throw new Error(c('tsw_error', 'string', [], []));
      focus = hit;
      update();
    });
    // for the web test: the whole distribution at temperature 1, and where a head is drawn
    live.probs = () => {
      const at = c('tsw_next_probs', 'number', ['number', 'number', 'number'], [s, 1, 0]) / 4;
      return Array.from(M.HEAPF32.subarray(at, at + V));
    };
    // the lens's last layer at the last position: what the model itself predicts there
    live.lensTop = () => {
      const n = c('tsw_tokens', 'number', ['number'], [s]), cap = c('tsw_capacity', 'number', ['number'], [s]);
      return n ? M.HEAP32[c('tsw_lens_ids', 'number', ['number'], [s]) / 4 + (L - 1) * cap + n - 1] : -1;
    };
    live.pointOf = (l, h) => {
      for (let y = 0; y < canvas.clientHeight; y += 4)
        for (let x = 0; x < canvas.clientWidth; x += 4)
          if (c('tsw_hit', 'number', ['number', 'number', 'number'], [s, x, y]) === l * H + h) {
            const top = canvas.getBoundingClientRect().top + window.scrollY;
            window.scrollTo(0, top + y - 100);
            const r = canvas.getBoundingClientRect();
            return { x: r.left + x + 8, y: r.top + y + 8 };
          }
      return null;
    };
    field.value = params.get('text') || '';
    field.disabled = false;
    field.focus();
    update();
    live.ready = true;
  }

  start().catch(e => {
    live.error = e.message;
    status.textContent = 'The live page could not start: ' + e.message;
    console.error(e);
  });
})();
