/**
 * An amount of manna as the rules handle it: exact, as the decimal text the ledger keeps
 * ("12.5", "0.0001"), never a float that drifts. The ledger's columns hold four decimal places,
 * so every amount is kept to four. Text, not a number, because a balance may carry more
 * significant digits than a double holds; the stores turn it into the database's decimal and
 * back. Shown as it is (`${cost}`), it reads as the ledger's decimals always have.
 */
export type Manna = string & { readonly manna: unique symbol };

/** The ledger's decimal places. */
const PLACES = 4;
const SCALE = 10n ** BigInt(PLACES);
/** From this power of ten up an amount is written with an exponent ("1e+21"), as JavaScript and the database's decimals write it. */
const EXPONENT_FROM = 21;

const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/i;

/** The amount in ten-thousandths of manna, rounded half away from zero; null for text that is no decimal. */
function tenThousandths(text: string): bigint | null {
  const m = DECIMAL.exec(text);
  if (!m) return null;
  const [, sign, whole, fraction = '', exponent = '0'] = m;
  const digits = BigInt(whole! + fraction);
  const scale = fraction.length - Number(exponent);
  let units: bigint;
  if (scale <= PLACES) units = digits * 10n ** BigInt(PLACES - scale);
  else {
    const divisor = 10n ** BigInt(scale - PLACES);
    units = digits / divisor + ((digits % divisor) * 2n >= divisor ? 1n : 0n);
  }
  return sign && units ? -units : units;
}

/** Ten-thousandths of manna written as the ledger's decimals write them: no trailing zeros, an exponent when huge. */
function written(units: bigint): Manna {
  const sign = units < 0n ? '-' : '';
  const digits = (units < 0n ? -units : units).toString();
  const exponent = digits.length - 1 - PLACES;
  if (exponent >= EXPONENT_FROM) {
    const significant = digits.replace(/0+$/, '');
    return `${sign}${significant[0]}${significant.length > 1 ? `.${significant.slice(1)}` : ''}e+${exponent}` as Manna;
  }
  const magnitude = units < 0n ? -units : units;
  const fraction = (magnitude % SCALE).toString().padStart(PLACES, '0').replace(/0+$/, '');
  return `${sign}${magnitude / SCALE}${fraction ? `.${fraction}` : ''}` as Manna;
}

/** A number of manna (what a tool's cost expression comes to), kept to the ledger's places. */
export function mannaOf(value: number): Manna {
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`${value} is not an amount of manna`);
  return written(tenThousandths(String(value))!);
}

/** An amount the database gave as decimal text (a balance, say), kept to the ledger's places. */
export function mannaFromText(text: string): Manna {
  const units = tenThousandths(text);
  if (units === null) throw new RangeError(`"${text}" is not an amount of manna`);
  return written(units);
}

/** True for an amount of nothing: there is nothing to take. */
export const isNoManna = (amount: Manna) => tenThousandths(amount) === 0n;

/** The amount as a JSON number, as the transports have always shown costs. */
export const mannaNumber = (amount: Manna) => Number(amount);
