/**
 * Passwords inside URLs, kept out of what is shown. Settings such as DATABASE_URL and REDIS_URL
 * carry a password, and drivers, fetch and our own messages may quote a URL whole: every message
 * a command prints, the start-up's failure and the service's logged errors go through this.
 */

/**
 * A scheme, `//`, and what comes before the last `@` of the same word: a URL's user and
 * password, even one whose password holds an unescaped `@` or `/`.
 */
const USER_INFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s"'<>@]*(?:@[^\s"'<>@]*)*)@/gi;
/** A password given as a query parameter (libpq reads `password` and `sslpassword` there). */
const PASSWORD_PARAMETER = /([?&](?:ssl)?password=)[^&#\s"']*/gi;

/** `text` with the password of every URL in it replaced by `***` (the user name stays: it is not a secret). */
export function hidePasswords(text: string): string {
  return text
    .replace(USER_INFO, (_, scheme: string, info: string) => {
      const colon = info.indexOf(':');
      return `${scheme}${colon === -1 ? info : `${info.slice(0, colon)}:***`}@`;
    })
    .replace(PASSWORD_PARAMETER, '$1***');
}
