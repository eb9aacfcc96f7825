/**
 * Steps queued and not yet read, oldest first, for both backends' `DecodeSession.read`.
 * Reading with nothing queued is the one misuse of the pipelined step no type can refuse:
 * how many steps are queued is known only at run time.
 */
export class StepFifo<T> {
  private readonly items: T[] = [];

  push(item: T): void {
    this.items.push(item);
  }

  /** The oldest queued step; throws where none is queued. */
  shift(): T {
    const item = this.items.shift();
    if (item === undefined) throw new Error('read(): no step queued: submit(token) queues one');
    return item;
  }

  some(test: (item: T) => boolean): boolean {
    return this.items.some(test);
  }

  get length(): number {
    return this.items.length;
  }

  clear(): void {
    this.items.length = 0;
  }
}
