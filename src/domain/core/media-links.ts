/** Where the service serves the files its tools make. */
export const MEDIA_PATH = '/media';

/** A media file's name: an id, an optional suffix, an extension; nothing that could leave the folder. */
export const MEDIA_FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]*\.[a-z0-9]{2,5}$/;

/** A link to a media file as it is stored: relative to the service, whatever address serves it. */
const STORED_LINK = new RegExp(`^${MEDIA_PATH}/${MEDIA_FILE_NAME.source.slice(1, -1)}$`);

/** The link stored for one of the service's media files (`/media/<file>`). */
export const mediaLink = (file: string) => `${MEDIA_PATH}/${file}`;

/**
 * Links to media files as clients get them. They are stored relative to the service
 * (`/media/<file>`: rows, tool results) and made absolute when shown, against where clients
 * reach the service now (PUBLIC_URL, or where it listens): data copied, restored or served from
 * another address links to where it is served from. Links to other hosts are left as they are.
 */
export interface MediaLinks {
  /** `link` made absolute when it is one of ours. */
  absolute<T extends string | null>(link: T): T;
  /** A copy of `value` (a tool's result, an event's) with each of our links in it made absolute. */
  absoluteIn<T>(value: T): T;
}

/** Links made absolute against `publicUrl()` (asked each time: the port may be known only once the service listens). */
export function mediaLinks(publicUrl: () => string): MediaLinks {
  const absolute = <T extends string | null>(link: T): T => (link !== null && STORED_LINK.test(link) ? `${publicUrl()}${link}` : link) as T;
  const absoluteIn = <T>(value: T): T => {
    if (typeof value === 'string') return absolute(value);
    if (Array.isArray(value)) return value.map(absoluteIn) as T;
    // JSON's objects only: a Date or a Decimal is not a tool's result to look into.
    if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, absoluteIn(v)])) as T;
  };
  return { absolute, absoluteIn };
}
