import { useCallback, useEffect, useState } from 'preact/hooks';
import { type Problem, problemOf, request } from './api.ts';

/** The GraphQL this view sends. */
const SEARCH = `query SearchForCollection($query: String!) {
  searchCreations(query: $query, limit: 20) { total docs { id name creator { username } } }
}`;
// Within the document cost limit (docs/security.md): 20 collections with their first 6 creations each.
const MY_COLLECTIONS = `query MyCollections { me { collections(first: 20) { edges { node {
  id name public creationCount cover { name }
  creations(first: 6) { edges { node { id name url thumbnail mediaAttributes } } }
} } } } }`;
const SET_VISIBILITY = `mutation SetCollectionVisibility($id: ID!, $input: UpdateCollectionInput!) { updateCollection(id: $id, input: $input) { id public } }`;
const CREATE = `mutation CreateCollection($input: CreateCollectionInput!) { createCollection(input: $input) { id } }`;
const ADD = `mutation AddToCollection($id: ID!, $creationIds: [ID!]!) { addCreationsToCollection(id: $id, creationIds: $creationIds) { id } }`;

interface Found {
  id: string;
  name: string;
  creator: { username: string };
}
interface Collection {
  id: string;
  name: string;
  public: boolean;
  creationCount: number;
  cover: { name: string } | null;
  creations: { edges: { node: Shown }[] };
}
interface Shown {
  id: string;
  name: string;
  url: string;
  thumbnail: string | null;
  mediaAttributes: { mimeType?: string };
}

/** A creation in a collection: a picture as a thumbnail linking to its full size, anything else by name. */
function CreationTile({ creation }: { creation: Shown }) {
  const picture = creation.mediaAttributes?.mimeType?.startsWith('image/');
  return (
    <li data-creation={creation.name}>
      {picture ? (
        <a href={creation.url} target="_blank" rel="noopener" title={creation.name}>
          <img src={creation.thumbnail ?? creation.url} alt={creation.name} loading="lazy" />
        </a>
      ) : (
        <a href={creation.url} target="_blank" rel="noopener">
          {creation.name}
        </a>
      )}
    </li>
  );
}

/** Search creations by meaning, tick some, and keep them in a new collection or one of yours. */
export function CollectionsView({ apiKey, onProblem }: { apiKey: string; onProblem: (p: Problem) => void }) {
  const [query, setQuery] = useState('');
  const [found, setFound] = useState<Found[] | null>(null);
  const [picked, setPicked] = useState<string[]>([]);
  const [collections, setCollections] = useState<Collection[]>([]);
  const [target, setTarget] = useState('new');
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);

  const load = useCallback(async () => {
    try {
      const data = await request<{ me: { collections: { edges: { node: Collection }[] } } }>(apiKey, MY_COLLECTIONS);
      setCollections(data.me.collections.edges.map((e) => e.node));
    } catch (e) {
      onProblem(problemOf(e));
    }
  }, [apiKey]);
  useEffect(() => {
    void load();
  }, [load]);

  const setVisibility = async (collection: Collection, visible: boolean) => {
    try {
      await request(apiKey, SET_VISIBILITY, { id: collection.id, input: { public: visible } });
      await load();
    } catch (err) {
      onProblem(problemOf(err));
    }
  };

  const search = async (e: Event) => {
    e.preventDefault();
    try {
      const data = await request<{ searchCreations: { docs: Found[] } }>(apiKey, SEARCH, { query });
      setFound(data.searchCreations.docs);
      setPicked([]);
    } catch (err) {
      onProblem(problemOf(err));
    }
  };

  const keep = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      if (target === 'new') await request(apiKey, CREATE, { input: { name, creationIds: picked } });
      else await request(apiKey, ADD, { id: target, creationIds: picked });
      setPicked([]);
      setName('');
      await load();
    } catch (err) {
      onProblem(problemOf(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="collections-view">
      <h2>Collections</h2>
      <form class="collection-search" onSubmit={search}>
        <input name="search" placeholder="Search creations by meaning…" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        <button type="submit" disabled={!query.trim()}>
          Search
        </button>
      </form>
      {found && (
        <ul class="search-results">
          {found.length === 0 && <li class="hint">Nothing matches.</li>}
          {found.map((c) => (
            <li key={c.id} data-creation={c.name}>
              <label>
                <input
                  type="checkbox"
                  checked={picked.includes(c.id)}
                  onChange={(e) => setPicked((p) => (e.currentTarget.checked ? [...p, c.id] : p.filter((id) => id !== c.id)))}
                />{' '}
                {c.name} <span class="muted">by {c.creator.username}</span>
              </label>
            </li>
          ))}
        </ul>
      )}
      <form class="collection-save" onSubmit={keep}>
        <select name="target" value={target} onChange={(e) => setTarget(e.currentTarget.value)}>
          <option value="new">New collection…</option>
          {collections.map((c) => (
            <option key={c.id} value={c.id}>
              {c.name}
            </option>
          ))}
        </select>
        {target === 'new' && (
          <input name="collection-name" placeholder="Name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        )}
        <button type="submit" disabled={busy || !picked.length || (target === 'new' && !name.trim())}>
          Keep {picked.length || ''} in collection
        </button>
      </form>
      <ul class="collections">
        {collections.map((c) => (
          <li key={c.id} data-collection={c.name} data-count={c.creationCount} data-public={String(c.public)}>
            <strong>{c.name}</strong>{' '}
            <span class="muted">
              {c.creationCount} creation{c.creationCount === 1 ? '' : 's'}
              {c.cover ? ` · cover: ${c.cover.name}` : ''}
            </span>{' '}
            <label class="visibility" title="Public: anyone may see it; private: only you">
              <input
                type="checkbox"
                name="collection-public"
                checked={c.public}
                onChange={(e) => setVisibility(c, e.currentTarget.checked)}
              />{' '}
              public
            </label>
            <ol class="pictures">
              {c.creations.edges.map(({ node }) => (
                <CreationTile key={node.id} creation={node} />
              ))}
            </ol>
          </li>
        ))}
      </ul>
    </div>
  );
}
