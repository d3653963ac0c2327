// Filter the node table by status, search it by name and sort it by any
// column. The page is whole without this: it only hides and orders rows.
(function () {
	"use strict";
	var form = document.getElementById("controls");
	var table = document.getElementById("node-table");
	var search = document.getElementById("search");
	var shown = document.getElementById("shown");
	// The rows come in chunks (tbody elements) of the same size, each
	// laid out by the browser only when in view. Rows shown fill the
	// first chunks, in order; the rest are hidden after them.
	var chunks = Array.prototype.slice.call(table.tBodies);
	var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr[data-o]"));
	var per = rows.length ? chunks[0].rows.length : 0;
	var collator = new Intl.Collator(undefined, {numeric: true});

	function filter() {
		var st = form.elements.status.value, q = search.value.trim().toLowerCase();
		var on = [], off = [];
		rows.forEach(function (r) {
			var show = (!st || r.className === st) && (!q || r.cells[0].textContent.toLowerCase().indexOf(q) >= 0);
			r.hidden = !show;
			(show ? on : off).push(r);
		});
		var placed = on.concat(off);
		chunks.forEach(function (c, k) {
			var frag = document.createDocumentFragment();
			placed.slice(k * per, (k + 1) * per).forEach(function (r) { frag.appendChild(r); });
			c.appendChild(frag);
			c.hidden = k > 0 && k * per >= on.length;
		});
		shown.textContent = on.length + " of " + rows.length + " nodes shown";
	}

	// The key of row r in column c, by the column's kind.
	var keys = {
		text: function (r, c) { return r.cells[c].textContent; },
		status: function (r) { return +r.getAttribute("data-o"); },
		number: function (r, c) { return parseInt(r.cells[c].textContent, 10) || 0; },
		time: function (r, c) { var t = r.cells[c].getAttribute("data-t"); return t === null ? -Infinity : +t; }
	};

	function sort(th, c) {
		var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
		var key = keys[th.getAttribute("data-sort")];
		var order = rows.map(function (r, i) { return {r: r, k: key(r, c), i: i}; });
		order.sort(function (a, b) {
			var d = typeof a.k === "string" ? collator.compare(a.k, b.k) : (a.k > b.k) - (a.k < b.k);
			return d * dir || a.i - b.i;
		});
		Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
		th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
		rows = order.map(function (o) { return o.r; });
		filter();
	}

	Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, c) {
		var b = document.createElement("button");
		b.type = "button";
		b.textContent = th.textContent;
		b.title = "sort by " + th.textContent.toLowerCase();
		b.addEventListener("click", function () { sort(th, c); });
		th.textContent = "";
		th.appendChild(b);
	});
	form.addEventListener("change", filter);
	search.addEventListener("input", filter);
	form.addEventListener("submit", function (e) { e.preventDefault(); });
	form.hidden = false;
	shown.textContent = rows.length + " of " + rows.length + " nodes shown";

	// Printed, every failed line shows.
	var opened = [];
	addEventListener("beforeprint", function () {
		opened = Array.prototype.filter.call(document.querySelectorAll("details:not([open])"), function (d) { d.open = true; return true; });
	});
	addEventListener("afterprint", function () {
		opened.forEach(function (d) { d.open = false; });
	});
})();
