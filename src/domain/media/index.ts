/** The media folder's front: the files of uploads and creations in the media directory. */
export { mediaStore } from './store.ts';
export type { MediaStore } from './store.ts';
