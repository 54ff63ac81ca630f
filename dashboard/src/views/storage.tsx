/** Storage: buckets (create, delete when empty), objects by prefix, upload with progress, download, delete, image preview. */
import { useEffect, useState } from 'preact/hooks';
import { blob, call, get, upload } from '../api.ts';
import { DataTable, ErrorLine, Field, useAction, useLoad } from '../ui.tsx';

interface Bucket {
  id: string;
  public: boolean;
  file_size_limit: number | null;
  allowed_mime_types: string[] | null;
  created_at: string;
}
interface StoredObject {
  id: string;
  name: string;
  size: number;
  mime_type: string | null;
  updated_at: string;
}

const objectPath = (bucket: string, name: string) => `/storage/v1/object/${encodeURIComponent(bucket)}/${name.split('/').map(encodeURIComponent).join('/')}`;

export function StorageView() {
  const buckets = useLoad(() => get<Bucket[]>('/storage/v1/bucket'));
  const [selected, setSelected] = useState<string | null>(null);
  const [form, setForm] = useState({ id: '', public: false, limit: '', mime: '' });
  const action = useAction();
  return (
    <section aria-labelledby="storage-title">
      <h2 id="storage-title">Storage</h2>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void action.run(async () => {
            const mime = form.mime.split(',').map((s) => s.trim()).filter(Boolean);
            await call('POST', '/storage/v1/bucket', {
              body: { id: form.id, public: form.public, file_size_limit: form.limit ? Number(form.limit) : null, allowed_mime_types: mime.length ? mime : null },
            });
            setSelected(form.id);
            setForm({ id: '', public: false, limit: '', mime: '' });
            buckets.reload();
          });
        }}
      >
        <Field label="New bucket">
          <input required value={form.id} onInput={(e) => setForm({ ...form, id: (e.target as HTMLInputElement).value })} />
        </Field>
        <label class="check">
          <input type="checkbox" checked={form.public} onChange={(e) => setForm({ ...form, public: (e.target as HTMLInputElement).checked })} /> public
        </label>
        <Field label="Size limit (bytes)">
          <input inputMode="numeric" pattern="[0-9]*" value={form.limit} onInput={(e) => setForm({ ...form, limit: (e.target as HTMLInputElement).value })} />
        </Field>
        <Field label="Allowed MIME types" hint="comma separated, e.g. image/png, image/jpeg">
          <input value={form.mime} onInput={(e) => setForm({ ...form, mime: (e.target as HTMLInputElement).value })} />
        </Field>
        <button type="submit" disabled={action.busy}>
          Create bucket
        </button>
      </form>
      <ErrorLine error={action.error} />
      <ErrorLine error={buckets.error} />
      <div class="split">
        <nav aria-label="Buckets" class="list">
          <ul>
            {buckets.data?.map((b) => (
              <li>
                <button type="button" aria-current={b.id === selected ? 'true' : undefined} onClick={() => setSelected(b.id)}>
                  {b.id} <small>{b.public ? 'public' : 'private'}</small>
                </button>
              </li>
            ))}
          </ul>
        </nav>
        <div class="detail">
          {selected ? (
            <Objects
              key={selected}
              bucket={selected}
              onDeleted={() => {
                setSelected(null);
                buckets.reload();
              }}
            />
          ) : (
            <p>Choose a bucket.</p>
          )}
        </div>
      </div>
    </section>
  );
}

function Objects({ bucket, onDeleted }: { bucket: string; onDeleted: () => void }) {
  const [prefix, setPrefix] = useState('');
  const objects = useLoad(() => get<StoredObject[]>(`/storage/v1/object/list/${encodeURIComponent(bucket)}?prefix=${encodeURIComponent(prefix)}`), [bucket, prefix]);
  const [progress, setProgress] = useState<{ name: string; fraction: number } | null>(null);
  const [preview, setPreview] = useState<{ name: string; url: string } | null>(null);
  const [dragging, setDragging] = useState(false);
  const action = useAction();
  useEffect(() => () => preview && URL.revokeObjectURL(preview.url), [preview]);

  const send = (files: FileList | File[]) =>
    action.run(async () => {
      for (const f of Array.from(files)) {
        const name = prefix + f.name;
        setProgress({ name, fraction: 0 });
        await upload(objectPath(bucket, name), f, f.type, (fraction) => setProgress({ name, fraction }));
      }
      setProgress(null);
      objects.reload();
    });
  const download = (o: StoredObject) =>
    action.run(async () => {
      const url = URL.createObjectURL(await blob(objectPath(bucket, o.name)));
      const a = document.createElement('a');
      a.href = url;
      a.download = o.name.split('/').pop() ?? o.name;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });
  return (
    <div>
      <h3>{bucket}</h3>
      <Field label="Prefix">
        <input value={prefix} onInput={(e) => setPrefix((e.target as HTMLInputElement).value)} />
      </Field>
      <div
        class={`drop${dragging ? ' over' : ''}`}
        onDragOver={(e) => {
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={(e) => {
          e.preventDefault();
          setDragging(false);
          if (e.dataTransfer?.files.length) void send(e.dataTransfer.files);
        }}
      >
        <label>
          Upload files (or drop them here)
          <input type="file" multiple onChange={(e) => (e.target as HTMLInputElement).files && void send((e.target as HTMLInputElement).files!)} />
        </label>
        {progress && (
          <p>
            <progress max={1} value={progress.fraction} aria-label={`Uploading ${progress.name}`} /> {progress.name} {Math.round(progress.fraction * 100)}%
          </p>
        )}
      </div>
      <ErrorLine error={action.error} />
      <ErrorLine error={objects.error} />
      {objects.data && (
        <DataTable
          caption="Objects"
          rows={objects.data as unknown as Record<string, unknown>[]}
          columns={['name', 'size', 'mime_type', 'updated_at']}
          actions={(r) => {
            const o = r as unknown as StoredObject;
            return (
              <>
                <button type="button" onClick={() => void download(o)} aria-label={`Download ${o.name}`}>
                  Download
                </button>{' '}
                {(o.mime_type ?? '').startsWith('image/') && (
                  <>
                    <button
                      type="button"
                      onClick={() => void action.run(async () => setPreview({ name: o.name, url: URL.createObjectURL(await blob(objectPath(bucket, o.name))) }))}
                      aria-label={`Preview ${o.name}`}
                    >
                      Preview
                    </button>{' '}
                  </>
                )}
                <button
                  type="button"
                  class="danger"
                  onClick={() =>
                    void action.run(async () => {
                      await call('DELETE', objectPath(bucket, o.name));
                      objects.reload();
                    })
                  }
                  aria-label={`Delete ${o.name}`}
                >
                  Delete
                </button>
              </>
            );
          }}
        />
      )}
      {preview && (
        <figure>
          <img src={preview.url} alt={`Preview of ${preview.name}`} class="preview" />
          <figcaption>{preview.name}</figcaption>
        </figure>
      )}
      <p>
        <button
          type="button"
          class="danger"
          onClick={() =>
            void action.run(async () => {
              await call('DELETE', `/storage/v1/bucket/${encodeURIComponent(bucket)}`);
              onDeleted();
            })
          }
        >
          Delete bucket {bucket}
        </button>{' '}
        <small>(only when it is empty)</small>
      </p>
    </div>
  );
}
