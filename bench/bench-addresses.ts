// The loopback addresses the prober benchmark's targets listen on: 127.10.a.b, a and b
// from 1 (Linux routes all of 127.0.0.0/8 to lo, so each is bindable without setup).
export function benchAddress(i: number): string {
  return `127.10.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`;
}
