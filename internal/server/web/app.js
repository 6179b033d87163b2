// The dashboard of aot serve: loops as a list (#/) and one loop's page
// (#/loops/ID). Everything it shows comes from the API in docs/API.md; it
// loads nothing from anywhere else.
import { ListPage } from './list.js';
import { el, fill, tick } from './dom.js';
import { LoopPage } from './loop.js';

let page = null;

function route() {
  // /loops/ID, if the server ever serves the page there, becomes the hash.
  const deep = location.pathname.match(/^\/loops\/([^/]+)\/?$/);
  if (deep) {
    history.replaceState(null, '', `/#/loops/${deep[1]}`);
  }
  const m = location.hash.match(/^#\/loops\/([^/?#]+)/);
  if (page) page.close();
  const root = document.getElementById('app');
  const crumbs = document.getElementById('crumbs');
  if (m) {
    const id = decodeURIComponent(m[1]);
    fill(crumbs, el('a', { href: '#/' }, 'loops'), ' / ', el('span', { class: 'mono' }, id));
    page = new LoopPage(root, id);
  } else {
    fill(crumbs, el('span', null, 'loops'));
    page = new ListPage(root);
  }
  page.open();
  window.scrollTo(0, 0);
}

window.addEventListener('hashchange', route);
setInterval(tick, 1000);
route();
