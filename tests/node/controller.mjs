// What a @kubernetes/client-node 2 controller does against a CRD, run by
// tests/tests/client_node.rs against the real stack: CoreV1Api namespaces, ApiextensionsV1Api
// CRDs, CustomObjectsApi CRUD (merge and JSON patch, status, delete options), Watch (with a
// resourceVersion, and sendInitialEvents' BOOKMARK), makeInformer (list+watch, callbacks, the
// re-list after a 410), KubernetesObjectApi (server-side apply with
// PatchStrategy.ServerSideApply: managedFields, upstream's 409 conflict, force) and ApiException
// (code and the Status body).
//
// Usage: node controller.mjs <kubeconfig>   (prints "all checks passed" at the end)
import assert from 'node:assert/strict';
import {
  ApiException,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  Watch,
  makeInformer,
  setHeaderOptions,
} from '@kubernetes/client-node';

const kc = new KubeConfig();
kc.loadFromFile(process.argv[2]);
const core = kc.makeApiClient(CoreV1Api);
const ext = kc.makeApiClient(ApiextensionsV1Api);
const api = kc.makeApiClient(CustomObjectsApi);

const group = 'cn.example.com';
const version = 'v1';
const plural = 'widgets';
const gvp = { group, version, plural };
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function step(name) {
  console.log(`- ${name}`);
}

async function until(what, f, ms = 30000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// client-node 2 puts the raw response text into ApiException.body; a controller parses it.
async function apiError(promise, code) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ApiException, `expected ApiException, got ${e}`);
    assert.equal(e.code, code, `HTTP code: ${e.message}`);
    const status = typeof e.body === 'string' ? JSON.parse(e.body) : e.body;
    assert.equal(status.kind, 'Status');
    assert.equal(status.apiVersion, 'v1');
    assert.equal(status.status, 'Failure');
    assert.equal(status.code, code);
    assert.match(e.headers['content-type'], /^application\/json/);
    return status;
  }
  throw new Error(`expected HTTP ${code}, the call succeeded`);
}

const widget = (name, namespace, spec = { size: 1 }, labels = {}) => ({
  apiVersion: `${group}/${version}`,
  kind: 'Widget',
  metadata: { name, namespace, labels },
  spec,
});

// ---- CoreV1Api: namespaces ----
step('namespaces');
for (const ns of ['cn-a', 'cn-b']) {
  const created = await core.createNamespace({ body: { metadata: { name: ns } } });
  assert.equal(created.metadata.name, ns);
  assert.equal(created.status.phase, 'Active');
}
const nsRead = await core.readNamespace({ name: 'cn-a' });
assert.equal(nsRead.kind, 'Namespace');
assert.equal(nsRead.metadata.labels['kubernetes.io/metadata.name'], 'cn-a');
const nsMerged = await core.patchNamespace(
  { name: 'cn-a', body: { metadata: { labels: { team: 'blue' } } } },
  merge,
);
assert.equal(nsMerged.metadata.labels.team, 'blue');
// Without options client-node sends the first patch type the spec lists: JSON patch.
const nsJson = await core.patchNamespace({
  name: 'cn-a',
  body: [{ op: 'add', path: '/metadata/annotations', value: { owner: 'cn' } }],
});
assert.equal(nsJson.metadata.annotations.owner, 'cn');
assert.equal(nsJson.metadata.labels.team, 'blue');
const nsMissing = await apiError(core.readNamespace({ name: 'cn-missing' }), 404);
assert.equal(nsMissing.reason, 'NotFound');
assert.equal(nsMissing.message, 'namespaces "cn-missing" not found');
assert.deepEqual(nsMissing.details, { name: 'cn-missing', kind: 'namespaces' });
const nsExists = await apiError(core.createNamespace({ body: { metadata: { name: 'cn-a' } } }), 409);
assert.equal(nsExists.reason, 'AlreadyExists');
assert.equal(nsExists.message, 'namespaces "cn-a" already exists');

// ---- ApiextensionsV1Api: the CRD ----
step('CRD create/read/list');
const crd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.${group}` },
  spec: {
    group,
    scope: 'Namespaced',
    names: { plural, singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
    versions: [
      {
        name: version,
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                properties: {
                  size: { type: 'integer', minimum: 0 },
                  color: { type: 'string' },
                },
              },
              status: {
                type: 'object',
                properties: { ready: { type: 'boolean' } },
              },
            },
          },
        },
      },
    ],
  },
};
const crdCreated = await ext.createCustomResourceDefinition({ body: crd });
assert.equal(crdCreated.metadata.name, 'widgets.cn.example.com');
assert.ok(crdCreated.metadata.uid);
const established = await until('the CRD to be Established', async () => {
  const c = await ext.readCustomResourceDefinition({ name: 'widgets.cn.example.com' });
  const cond = (c.status?.conditions || []).find((x) => x.type === 'Established');
  return cond?.status === 'True' ? c : null;
});
assert.equal(established.spec.names.listKind, 'WidgetList');
const crds = await ext.listCustomResourceDefinition();
assert.equal(crds.kind, 'CustomResourceDefinitionList');
assert.ok(crds.items.some((c) => c.metadata.name === 'widgets.cn.example.com'));
const crdExists = await apiError(ext.createCustomResourceDefinition({ body: crd }), 409);
assert.equal(crdExists.reason, 'AlreadyExists');
assert.deepEqual(crdExists.details, {
  name: 'widgets.cn.example.com',
  group: 'apiextensions.k8s.io',
  kind: 'customresourcedefinitions',
});
// The CR endpoints can lag behind Established for a moment (upstream too); wait for a list.
await until('the widgets endpoint', async () => {
  try {
    await api.listNamespacedCustomObject({ ...gvp, namespace: 'cn-a' });
    return true;
  } catch {
    return false;
  }
});

// ---- CustomObjectsApi ----
step('custom objects create/get/list');
const w1 = await api.createNamespacedCustomObject({
  ...gvp,
  namespace: 'cn-a',
  body: widget('w1', 'cn-a', { size: 1 }, { app: 'w' }),
});
assert.equal(w1.apiVersion, 'cn.example.com/v1');
assert.equal(w1.kind, 'Widget');
assert.equal(w1.metadata.name, 'w1');
assert.equal(w1.metadata.namespace, 'cn-a');
assert.equal(w1.metadata.generation, 1);
assert.match(w1.metadata.uid, /^[0-9a-f-]{36}$/);
assert.match(w1.metadata.resourceVersion, /^\d+$/);
assert.deepEqual(w1.spec, { size: 1 });
await api.createNamespacedCustomObject({
  ...gvp,
  namespace: 'cn-b',
  body: widget('w2', 'cn-b', { size: 2 }),
});
const got = await api.getNamespacedCustomObject({ ...gvp, namespace: 'cn-a', name: 'w1' });
assert.deepEqual(got, w1);
const listA = await api.listNamespacedCustomObject({ ...gvp, namespace: 'cn-a' });
assert.equal(listA.kind, 'WidgetList');
assert.equal(listA.apiVersion, 'cn.example.com/v1');
assert.match(listA.metadata.resourceVersion, /^\d+$/);
assert.deepEqual(
  listA.items.map((i) => i.metadata.name),
  ['w1'],
);
const listAll = await api.listClusterCustomObject(gvp);
assert.equal(listAll.kind, 'WidgetList');
assert.deepEqual(
  listAll.items.map((i) => `${i.metadata.namespace}/${i.metadata.name}`),
  ['cn-a/w1', 'cn-b/w2'],
);
const labelled = await api.listClusterCustomObject({ ...gvp, labelSelector: 'app=w' });
assert.deepEqual(
  labelled.items.map((i) => i.metadata.name),
  ['w1'],
);
const page = await api.listClusterCustomObject({ ...gvp, limit: 1 });
assert.equal(page.items.length, 1);
assert.ok(page.metadata.continue, 'a limited list carries metadata.continue');
const page2 = await api.listClusterCustomObject({ ...gvp, limit: 1, _continue: page.metadata.continue });
assert.deepEqual(
  [...page.items, ...page2.items].map((i) => i.metadata.name),
  ['w1', 'w2'],
);

step('errors: 404, 409, 422');
const missing = await apiError(
  api.getNamespacedCustomObject({ ...gvp, namespace: 'cn-a', name: 'nope' }),
  404,
);
assert.equal(missing.reason, 'NotFound');
assert.equal(missing.message, 'widgets.cn.example.com "nope" not found');
assert.deepEqual(missing.details, { name: 'nope', group, kind: 'widgets' });
const dup = await apiError(
  api.createNamespacedCustomObject({ ...gvp, namespace: 'cn-a', body: widget('w1', 'cn-a') }),
  409,
);
assert.equal(dup.reason, 'AlreadyExists');
assert.equal(dup.message, 'widgets.cn.example.com "w1" already exists');
assert.deepEqual(dup.details, { name: 'w1', group, kind: 'widgets' });
const invalid = await apiError(
  api.createNamespacedCustomObject({
    ...gvp,
    namespace: 'cn-a',
    body: widget('bad', 'cn-a', { size: -1 }),
  }),
  422,
);
assert.equal(invalid.reason, 'Invalid');
assert.equal(invalid.details.name, 'bad');
assert.equal(invalid.details.group, group);
assert.equal(invalid.details.kind, 'Widget');
assert.deepEqual(invalid.details.causes, [
  {
    reason: 'FieldValueInvalid',
    message: 'Invalid value: -1: spec.size in body should be greater than or equal to 0',
    field: 'spec.size',
  },
]);
assert.equal(
  invalid.message,
  'Widget.cn.example.com "bad" is invalid: spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0',
);

step('replace, conflict, merge patch, JSON patch');
const replaced = await api.replaceNamespacedCustomObject({
  ...gvp,
  namespace: 'cn-a',
  name: 'w1',
  body: { ...w1, spec: { size: 3 } },
});
assert.equal(replaced.metadata.generation, 2);
assert.deepEqual(replaced.spec, { size: 3 });
assert.notEqual(replaced.metadata.resourceVersion, w1.metadata.resourceVersion);
const stale = await apiError(
  api.replaceNamespacedCustomObject({
    ...gvp,
    namespace: 'cn-a',
    name: 'w1',
    body: { ...w1, spec: { size: 4 } },
  }),
  409,
);
assert.equal(stale.reason, 'Conflict');
assert.equal(
  stale.message,
  'Operation cannot be fulfilled on widgets.cn.example.com "w1": the object has been modified; please apply your changes to the latest version and try again',
);
assert.deepEqual(stale.details, { name: 'w1', group, kind: 'widgets' });
const merged = await api.patchNamespacedCustomObject(
  { ...gvp, namespace: 'cn-a', name: 'w1', body: { spec: { color: 'red' } } },
  merge,
);
assert.deepEqual(merged.spec, { size: 3, color: 'red' });
assert.equal(merged.metadata.generation, 3);
const jsonPatched = await api.patchNamespacedCustomObject({
  ...gvp,
  namespace: 'cn-a',
  name: 'w1',
  body: [
    { op: 'test', path: '/spec/size', value: 3 },
    { op: 'replace', path: '/spec/size', value: 5 },
    { op: 'remove', path: '/spec/color' },
  ],
});
assert.deepEqual(jsonPatched.spec, { size: 5 });
assert.equal(jsonPatched.metadata.generation, 4);
const failedTest = await apiError(
  api.patchNamespacedCustomObject({
    ...gvp,
    namespace: 'cn-a',
    name: 'w1',
    body: [{ op: 'test', path: '/spec/size', value: 99 }],
  }),
  422,
);
assert.equal(failedTest.reason, 'Invalid');
const badPatch = await apiError(
  api.patchNamespacedCustomObject(
    { ...gvp, namespace: 'cn-a', name: 'w1', body: { spec: { size: -3 } } },
    merge,
  ),
  422,
);
assert.equal(badPatch.reason, 'Invalid');

step('status subresource');
const withStatus = await api.patchNamespacedCustomObjectStatus(
  { ...gvp, namespace: 'cn-a', name: 'w1', body: { status: { ready: true }, spec: { size: 9 } } },
  merge,
);
assert.deepEqual(withStatus.status, { ready: true });
assert.deepEqual(withStatus.spec, { size: 5 }, 'the status endpoint ignores spec');
assert.equal(withStatus.metadata.generation, 4, 'a status write keeps the generation');
const statusRead = await api.getNamespacedCustomObjectStatus({
  ...gvp,
  namespace: 'cn-a',
  name: 'w1',
});
assert.deepEqual(statusRead.status, { ready: true });
const statusJson = await api.patchNamespacedCustomObjectStatus({
  ...gvp,
  namespace: 'cn-a',
  name: 'w1',
  body: [{ op: 'replace', path: '/status/ready', value: false }],
});
assert.deepEqual(statusJson.status, { ready: false });
const specNoStatus = await api.patchNamespacedCustomObject(
  { ...gvp, namespace: 'cn-a', name: 'w1', body: { status: { ready: true } } },
  merge,
);
assert.deepEqual(specNoStatus.status, { ready: false }, 'the main endpoint ignores status');

// ---- Watch ----
step('watch from a resourceVersion');
const watch = new Watch(kc);
const base = await api.listNamespacedCustomObject({ ...gvp, namespace: 'cn-a' });
const events = [];
let watchDone = null;
const ctl = await watch.watch(
  `/apis/${group}/${version}/namespaces/cn-a/${plural}`,
  { resourceVersion: base.metadata.resourceVersion, allowWatchBookmarks: true },
  (type, obj) => {
    if (type !== 'BOOKMARK') events.push([type, obj.metadata.name, obj.metadata.resourceVersion]);
  },
  (err) => {
    watchDone = err ?? 'closed';
  },
);
const w3 = await api.createNamespacedCustomObject({
  ...gvp,
  namespace: 'cn-a',
  body: widget('w3', 'cn-a'),
});
const w3b = await api.patchNamespacedCustomObject(
  { ...gvp, namespace: 'cn-a', name: 'w3', body: { spec: { size: 2 } } },
  merge,
);
const gone = await api.deleteNamespacedCustomObject({ ...gvp, namespace: 'cn-a', name: 'w3' });
assert.equal(gone.kind, 'Status');
assert.equal(gone.status, 'Success');
assert.equal(gone.details.name, 'w3');
assert.equal(gone.details.kind, 'widgets');
assert.equal(gone.details.group, group);
assert.equal(gone.details.uid, w3.metadata.uid);
await until('three watch events', () => events.length >= 3, 20000);
assert.equal(watchDone, null, `the watch ended early: ${watchDone}`);
assert.deepEqual(
  events.map((e) => [e[0], e[1]]),
  [
    ['ADDED', 'w3'],
    ['MODIFIED', 'w3'],
    ['DELETED', 'w3'],
  ],
);
assert.equal(events[0][2], w3.metadata.resourceVersion);
assert.equal(events[1][2], w3b.metadata.resourceVersion);
assert.ok(BigInt(events[2][2]) > BigInt(events[1][2]));
ctl.abort();

step('watch with sendInitialEvents ends with the initial-events-end BOOKMARK');
const initial = [];
const ctl2 = await watch.watch(
  `/apis/${group}/${version}/${plural}`,
  { sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan', allowWatchBookmarks: true },
  (type, obj) => initial.push([type, obj]),
  () => {},
);
await until('the initial-events-end bookmark', () => initial.some((e) => e[0] === 'BOOKMARK'), 20000);
ctl2.abort();
assert.deepEqual(
  initial.filter((e) => e[0] === 'ADDED').map((e) => e[1].metadata.name).sort(),
  ['w1', 'w2'],
);
const bm = initial.find((e) => e[0] === 'BOOKMARK')[1];
assert.equal(bm.kind, 'Widget');
assert.equal(bm.apiVersion, 'cn.example.com/v1');
assert.equal(bm.metadata.annotations['k8s.io/initial-events-end'], 'true');
assert.match(bm.metadata.resourceVersion, /^\d+$/);

// ---- makeInformer ----
step('informer: list, then watch callbacks');
const path = `/apis/${group}/${version}/namespaces/cn-a/${plural}`;
const informer = makeInformer(kc, path, () =>
  api.listNamespacedCustomObject({ ...gvp, namespace: 'cn-a' }),
);
const seen = [];
const errors = [];
informer.on('add', (o) => seen.push(['add', o.metadata.name]));
informer.on('update', (o) => seen.push(['update', o.metadata.name]));
informer.on('delete', (o) => seen.push(['delete', o.metadata.name]));
// stop() aborts the watch request, which client-node reports as an AbortError.
informer.on('error', (e) => {
  if (e?.name !== 'AbortError') errors.push(e);
});
await informer.start();
await until('the initial add', () => seen.length >= 1);
assert.deepEqual(seen, [['add', 'w1']]);
await api.createNamespacedCustomObject({ ...gvp, namespace: 'cn-a', body: widget('i1', 'cn-a') });
await until('add i1', () => seen.length >= 2);
await api.patchNamespacedCustomObject(
  { ...gvp, namespace: 'cn-a', name: 'i1', body: { spec: { size: 7 } } },
  merge,
);
await until('update i1', () => seen.length >= 3);
assert.equal(informer.get('i1', 'cn-a').spec.size, 7);
// Delete with a propagation policy (a DeleteOptions body): Foreground returns the object
// with the foregroundDeletion finalizer; the garbage collector then removes it.
const fg = await api.deleteNamespacedCustomObject({
  ...gvp,
  namespace: 'cn-a',
  name: 'i1',
  propagationPolicy: 'Foreground',
});
assert.equal(fg.kind, 'Widget');
assert.ok(fg.metadata.deletionTimestamp, 'foreground deletion sets deletionTimestamp');
assert.deepEqual(fg.metadata.finalizers, ['foregroundDeletion']);
await until('delete i1', () => seen.some((e) => e[0] === 'delete'));
assert.deepEqual(seen, [
  ['add', 'w1'],
  ['add', 'i1'],
  ['update', 'i1'],
  ['update', 'i1'],
  ['delete', 'i1'],
]);
await apiError(api.getNamespacedCustomObject({ ...gvp, namespace: 'cn-a', name: 'i1' }), 404);

step('informer: re-list after 410 Expired');
await informer.stop();
const staleRv = informer.latestResourceVersion();
seen.length = 0;
// Outrun the storage's short watch history (--history-len 16) while the informer is away.
await api.createNamespacedCustomObject({ ...gvp, namespace: 'cn-a', body: widget('i2', 'cn-a') });
for (let i = 0; i < 20; i++) {
  await api.patchNamespacedCustomObject(
    { ...gvp, namespace: 'cn-a', name: 'i2', body: { spec: { size: i } } },
    merge,
  );
}
await api.deleteNamespacedCustomObject({
  ...gvp,
  namespace: 'cn-a',
  name: 'w1',
  propagationPolicy: 'Background',
});
// The informer's resourceVersion is now too old: a plain watch gets 410 Expired...
let expired = null;
await watch.watch(
  path,
  { resourceVersion: staleRv },
  (type, obj) => {
    if (type === 'ERROR') expired = obj;
  },
  (err) => {
    if (err && expired === null) expired = { code: err.statusCode ?? err.code };
  },
);
await until('410 on a stale watch', () => expired !== null);
assert.equal(expired.code, 410);
if (expired.kind) {
  assert.equal(expired.reason, 'Expired');
  assert.match(expired.message, /^too old resource version: \d+ \(\d+\)$/);
}
// ...and the informer re-lists: w1 (gone meanwhile) is deleted, i2 is added.
await informer.start();
await until('the re-list', () => seen.length >= 2);
assert.deepEqual(
  seen.map((e) => e.join(' ')).sort(),
  ['add i2', 'delete w1'],
);
assert.equal(informer.get('i2', 'cn-a').spec.size, 19);
assert.deepEqual(errors, []);
assert.notEqual(informer.latestResourceVersion(), staleRv);
await informer.stop();

// ---- KubernetesObjectApi: the generic client resolves kind -> resource by discovery ----
step('KubernetesObjectApi and dryRun');
const objects = KubernetesObjectApi.makeApiClient(kc);
const dry = await api.createNamespacedCustomObject({
  ...gvp,
  namespace: 'cn-a',
  body: widget('dry', 'cn-a'),
  dryRun: 'All',
});
assert.equal(dry.metadata.name, 'dry');
assert.match(dry.metadata.uid, /^[0-9a-f-]{36}$/);
assert.ok(!('resourceVersion' in dry.metadata), 'a dry-run create has no resourceVersion');
await apiError(api.getNamespacedCustomObject({ ...gvp, namespace: 'cn-a', name: 'dry' }), 404);
const o1 = await objects.create(widget('o1', 'cn-a', { size: 4 }));
assert.equal(o1.metadata.name, 'o1');
const o1read = await objects.read({
  apiVersion: `${group}/${version}`,
  kind: 'Widget',
  metadata: { name: 'o1', namespace: 'cn-a' },
});
assert.deepEqual(o1read.spec, { size: 4 });
// KubernetesObjectApi.patch defaults to a strategic merge patch, which custom resources
// refuse with 415 (upstream: the CR handler accepts JSON, merge and apply patches).
const smp = await apiError(objects.patch(widget('o1', 'cn-a', { size: 6 })), 415);
assert.equal(smp.reason, 'UnsupportedMediaType');
assert.match(
  smp.message,
  /^the body of the request was in an unknown format - accepted media types include: application\/json-patch\+json, application\/merge-patch\+json/,
);
const o1patched = await objects.patch(
  { apiVersion: `${group}/${version}`, kind: 'Widget', metadata: { name: 'o1', namespace: 'cn-a' }, spec: { size: 6 } },
  undefined,
  undefined,
  undefined,
  undefined,
  PatchStrategy.MergePatch,
);
assert.deepEqual(o1patched.spec, { size: 6 });
const olist = await objects.list(`${group}/${version}`, 'Widget', 'cn-a');
assert.deepEqual(
  olist.items.map((i) => i.metadata.name).sort(),
  ['i2', 'o1'],
);
const odel = await objects.delete(o1read);
assert.equal(odel.status, 'Success');
const unknownKind = await objects
  .read({ apiVersion: `${group}/${version}`, kind: 'Gadget', metadata: { name: 'x', namespace: 'cn-a' } })
  .then(
    () => null,
    (e) => e,
  );
assert.match(String(unknownKind), /Unrecognized API version and kind: cn.example.com\/v1 Gadget/);

// ---- server-side apply: KubernetesObjectApi.patch with PatchStrategy.ServerSideApply ----
step('server-side apply');
const applyWidget = (spec, manager, force) =>
  objects.patch(
    { apiVersion: `${group}/${version}`, kind: 'Widget', metadata: { name: 's1', namespace: 'cn-a' }, spec },
    undefined,
    undefined,
    manager,
    force,
    PatchStrategy.ServerSideApply,
  );
const entries = (o) =>
  (o.metadata.managedFields || []).map((e) => [e.manager, e.operation, JSON.stringify(e.fieldsV1)]);
const s1 = await applyWidget({ size: 2, color: 'red' }, 'node-mgr');
assert.deepEqual(s1.spec, { size: 2, color: 'red' });
assert.deepEqual(entries(s1), [['node-mgr', 'Apply', '{"f:spec":{"f:color":{},"f:size":{}}}']]);
assert.equal(s1.metadata.managedFields[0].apiVersion, `${group}/${version}`);
assert.ok(s1.metadata.managedFields[0].time instanceof Date);
const s1again = await applyWidget({ size: 3, color: 'red' }, 'node-mgr');
assert.equal(s1again.spec.size, 3);
assert.equal(s1again.metadata.generation, 2);
assert.deepEqual(entries(s1again), [['node-mgr', 'Apply', '{"f:spec":{"f:color":{},"f:size":{}}}']]);
const ssaConflict = await apiError(applyWidget({ color: 'blue' }, 'node-other'), 409);
assert.equal(ssaConflict.reason, 'Conflict');
assert.equal(ssaConflict.message, 'Apply failed with 1 conflict: conflict with "node-mgr": .spec.color');
assert.deepEqual(ssaConflict.details, {
  causes: [{ reason: 'FieldManagerConflict', message: 'conflict with "node-mgr"', field: '.spec.color' }],
});
// Without fieldManager an apply is refused (ValidatePatchOptions).
const ssaNoManager = await apiError(applyWidget({ color: 'blue' }), 422);
assert.equal(
  ssaNoManager.message,
  'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
);
const s1forced = await applyWidget({ color: 'blue' }, 'node-other', true);
assert.deepEqual(s1forced.spec, { size: 3, color: 'blue' });
assert.deepEqual(entries(s1forced), [
  ['node-mgr', 'Apply', '{"f:spec":{"f:size":{}}}'],
  ['node-other', 'Apply', '{"f:spec":{"f:color":{}}}'],
]);

// ---- namespace delete ----
step('namespace delete');
// Upstream answers with the Namespace (phase Terminating); client-node's generated code
// types the answer as V1Status, so only what survives that mapping is checked.
const term = await core.deleteNamespace({ name: 'cn-b' });
assert.equal(term.kind, 'Namespace');
assert.equal(term.status.phase, 'Terminating');
await until('cn-b to be gone', async () => {
  try {
    await core.readNamespace({ name: 'cn-b' });
    return false;
  } catch (e) {
    return e instanceof ApiException && e.code === 404;
  }
});
await apiError(api.getNamespacedCustomObject({ ...gvp, namespace: 'cn-b', name: 'w2' }), 404);

console.log('all checks passed');
