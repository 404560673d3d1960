// The script's standard library (K1, K2, K4). `N` holds the host's native functions; it is
// captured here and never reachable from the model's code. Returns the value formatter the host
// uses for the script's result.
(function (N, catalog) {
  "use strict";
  const g = globalThis;
  // `.then()` runs in a JS frame of its own, so the host can tell its reactions from an `await`
  // in the script's body (ScriptHooks in engine/boa.rs). Same name, length and behaviour.
  const nativeThen = Promise.prototype.then;
  const apply = Reflect.apply;
  Object.defineProperty(Promise.prototype, "then", {
    value: {
      then(onFulfilled, onRejected) {
        return apply(nativeThen, this, [onFulfilled, onRejected]);
      },
    }.then,
    writable: true,
    enumerable: false,
    configurable: true,
  });
  const mkError = (kind, message, extra) => {
    const e = new Error(message);
    e.name = kind;
    if (extra) {
      for (const k of Object.keys(extra)) {
        if (extra[k] !== undefined) e[k] = extra[k];
      }
    }
    return e;
  };
  // A Map or Set becomes what a model means by it (an object, or [key, value] pairs when a key
  // is no string or number; a list), never the `{}` JSON.stringify makes of it.
  const MapC = Map;
  const SetC = Set;
  const fromEntries = Object.fromEntries;
  const plain = (value) => {
    if (value instanceof MapC) {
      const entries = Array.from(value.entries());
      const simple = entries.every(([k]) => typeof k === "string" || typeof k === "number");
      return simple ? fromEntries(entries) : entries;
    }
    if (value instanceof SetC) return Array.from(value);
    return value;
  };
  // How deep a returned, logged or stored value may nest. boa's JSON.stringify recurses on the
  // native stack and builds indented text in time that grows with the square of the depth: far
  // deeper data would take seconds, or overflow that stack and kill the script unannounced.
  const MAX_DEPTH = 500;
  // A JSON.stringify replacer for plain data: BigInts as digits, Maps and Sets as above, a value
  // met again inside itself replaced by what `onCycle` returns (or throws), and a RangeError past
  // MAX_DEPTH levels.
  const jsonData = (onCycle) => {
    const ancestors = [];
    return function (key, value) {
      if (typeof value === "bigint") return value.toString();
      if (typeof value !== "object" || value === null) return value;
      while (ancestors.length && ancestors[ancestors.length - 1] !== this) ancestors.pop();
      if (ancestors.indexOf(value) !== -1) return onCycle();
      if (ancestors.length >= MAX_DEPTH) {
        throw new RangeError("the value is nested more than " + MAX_DEPTH + " levels deep; use flatter data");
      }
      ancestors.push(value);
      const converted = plain(value);
      // The converted value is the holder of the children: it goes on the chain too.
      if (converted !== value) ancestors.push(converted);
      return converted;
    };
  };
  const fmt = (v) => {
    if (typeof v === "string") return v;
    if (v === undefined) return "undefined";
    if (typeof v === "function") return "[function]";
    if (typeof v === "bigint") return v.toString();
    if (v instanceof Error) return (v.name || "Error") + ": " + v.message;
    // Like Node's inspection, a cycle is shown as "[Circular]" instead of failing; BigInts
    // inside become their digits. A value whose toJSON throws is an error, never "[object Object]".
    let s;
    try {
      s = JSON.stringify(v, jsonData(() => "[Circular]"), 2);
    } catch (e) {
      throw new TypeError("a value could not be converted to JSON (" + (e && e.message) + "); return or log plain data");
    }
    return s === undefined ? String(v) : s;
  };
  // Arguments cross as JSON text, every string well-formed: a lone surrogate (an emoji cut in
  // half by slice()) reaches the tool as U+FFFD, like Node, not as the text "\uD83D".
  const stringify = JSON.stringify;
  const JSONobj = JSON;
  const wellFormed = String.prototype.toWellFormed;
  const wellFormedStrings = (key, value) => (typeof value === "string" ? apply(wellFormed, value, []) : value);
  const argsJson = (args) =>
    args === undefined || args === null ? args : apply(stringify, JSONobj, [args, wellFormedStrings]);
  const invoke = (name, args) => {
    const r = N.call(String(name), argsJson(args));
    if (r.error) {
      return Promise.reject(mkError(r.error, r.message, { tool: String(name), line: r.line, column: r.column }));
    }
    return r.promise.then((res) => {
      if (res.ok) return res.text;
      throw mkError("ToolError", res.message, {
        tool: String(name),
        output: res.output,
        status: res.status,
        line: r.line,
        column: r.column,
      });
    });
  };
  const namespace = (obj, prefix) =>
    new Proxy(obj, {
      get(t, p) {
        if (typeof p !== "string") return undefined;
        if (Object.prototype.hasOwnProperty.call(t, p)) return t[p];
        if (p === "then" || p === "toJSON") return undefined;
        // Unknown names still become a call, so the model gets UnknownTool with suggestions.
        return (args) => invoke(prefix + p, args);
      },
    });
  // A tool set as a property, also over a function's own `name` or `length`.
  const setTool = (obj, key, fn) =>
    Object.defineProperty(obj, key, { value: fn, writable: true, enumerable: true, configurable: true });
  const base = {};
  const servers = new Map();
  for (const t of catalog) {
    if (t.namespace) {
      if (!servers.has(t.namespace)) servers.set(t.namespace, []);
      servers.get(t.namespace).push(t);
    } else {
      setTool(base, t.name, (args) => invoke(t.name, args));
    }
  }
  // An MCP server named like a built-in tool (the usual `memory` server) is a namespace that
  // can still be called as that tool: `tools.memory({...})` and `tools.memory.recall({...})`.
  for (const [server, list] of servers) {
    const builtin = Object.prototype.hasOwnProperty.call(base, server) && typeof base[server] === "function";
    const target = builtin ? (args) => invoke(server, args) : {};
    for (const t of list) setTool(target, t.tool, (args) => invoke(t.name, args));
    setTool(base, server, namespace(target, server + "__"));
  }
  const define = (name, value) =>
    Object.defineProperty(g, name, { value, writable: false, enumerable: false, configurable: false });
  define("tools", namespace(base, ""));
  define("call", (name, args) => invoke(name, args));
  define("text", (...values) => {
    N.text(values.map(fmt).join(" "));
  });
  const log = (level) => (...values) => {
    N.log(level, values.map(fmt).join(" "));
  };
  define(
    "console",
    Object.freeze({ log: log("log"), info: log("info"), warn: log("warn"), error: log("error"), debug: log("debug") }),
  );
  define("searchTools", (query, opts) => JSON.parse(N.search(String(query ?? ""), JSON.stringify(opts ?? {}))));
  define("describeTool", (name) => {
    const r = N.describe(String(name));
    if (r.error) throw mkError(r.error, r.message, { tool: String(name) });
    return r.text;
  });
  define("ALL_TOOLS", Object.freeze(JSON.parse(N.all())));
  define("store", (key, value) => {
    let json;
    if (value !== undefined) {
      json = JSON.stringify(
        value,
        jsonData(() => {
          throw new TypeError("store(): the value contains itself (a cycle); store plain data");
        }),
      );
      // A function or a symbol has no JSON: storing it must not delete the key.
      if (json === undefined) throw new TypeError("store(): a " + typeof value + " cannot be stored; store plain data");
    }
    const r = N.store(String(key), json);
    if (r && r.error) throw mkError(r.error, r.message);
  });
  define("load", (key) => {
    const s = N.load(String(key));
    return s === undefined ? undefined : JSON.parse(s);
  });
  define("sleep", (ms) => N.sleep(Number(ms) || 0));
  // Fast native helpers: splitting and filtering large strings in JavaScript is quadratic in boa.
  define("lines", (s) => N.lines(String(s)));
  define("grep", (s, needle, opts) => N.grep(String(s), String(needle), !!(opts && opts.ignoreCase)));
  // read_file shows lines as `N→text`: this gives the file's own text back (to JSON.parse it).
  define("fileText", (s) => N.fileText(String(s)));
  return fmt;
})
