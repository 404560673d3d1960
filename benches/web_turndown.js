// turndown (npm) on one page, N times: prints the median milliseconds and writes the Markdown.
// Usage: node web_turndown.js TURNDOWN_DIR PAGE.html ITERATIONS OUT.md
const [dir, page, iterations, out] = process.argv.slice(2);
const fs = require("fs");
const TurndownService = require(require("path").join(dir, "node_modules", "turndown"));
const html = fs.readFileSync(page, "utf8");
// The same choices as kodik-web: ATX headings, fenced code, no scripts/styles/nav/footer.
const td = new TurndownService({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "*" });
td.remove(["script", "style", "noscript", "template", "svg", "iframe", "nav", "footer", "head"]);
let md = "";
md = td.turndown(html); // warm-up
const times = [];
for (let i = 0; i < Number(iterations); i++) {
  const t = process.hrtime.bigint();
  md = td.turndown(html);
  times.push(Number(process.hrtime.bigint() - t) / 1e6);
}
times.sort((a, b) => a - b);
fs.writeFileSync(out, md);
console.log(times[Math.floor(times.length / 2)].toFixed(2));
